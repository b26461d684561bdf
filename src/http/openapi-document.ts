import { isDeepStrictEqual } from 'node:util';
import { EVENT_SCHEMAS } from '../webhooks/event-schemas.ts';
import { PROBLEMS } from './problems.ts';

/**
 * What the OpenAPI document derives in one place, so that every route (including ones added
 * later) gets it without repeating it: operation ids from method and path, a description, the
 * tag, which routes need a key, every error status as `application/problem+json` with its headers,
 * the success headers (RateLimit-* on answers to a key, Idempotent-Replayed on its POSTs, whose
 * Idempotency-Key parameter it adds), request bodies without the read-only fields that
 * `WritableBody` ignores, `readOnly` on those fields in responses, and every schema with a `title`
 * as a named component. A route only names its schemas (`title`: an untitled object stays inline,
 * which the document test refuses) and may set `operationId` or `description` itself.
 */

// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is plain JSON walked generically.
type Json = Record<string, any>;

/** The route options the document reads (a subset of Fastify's). */
export interface RouteInfo {
  url: string;
  method: string | string[];
  config?: { public?: boolean; owner?: string } | undefined;
}

/** Tags and what they hold; a route's tag that is missing here is refused by the document test. */
const TAGS: { name: string; description: string }[] = [
  { name: 'Voicemail drops', description: 'Ringless voicemail sent to contacts now or later, with delivery counters.' },
  { name: 'Templated emails', description: 'Emails rendered from a library template and a signature, sent to contacts now or later.' },
  { name: 'Contacts', description: "A user's contacts (an email, a phone or both) with their tags; bulk import from CSV or JSON lines." },
  { name: 'Tags', description: 'Named groups of contacts, the usual recipients of a message.' },
  { name: 'Signatures', description: 'Email signatures a templated email ends with.' },
  { name: 'Templated messages', description: 'The template library shared by every user (written by Administrators).' },
  { name: 'Media', description: 'Audio files for voicemail drops: uploaded or fetched, served at a public URL.' },
  { name: 'Users', description: 'Accounts, their roles and their teams.' },
  { name: 'Teams', description: 'Groups of users managed by a Team Administrator.' },
  { name: 'API keys', description: 'Bearer keys that authenticate API requests.' },
  { name: 'Domains', description: 'Sender domains: whether their SPF, DKIM, DMARC, MX and Return-Path records are as Hopper needs.' },
  { name: 'Webhooks', description: 'Endpoints of yours that Hopper posts signed events to (Standard Webhooks).' },
  {
    name: 'Provider callbacks',
    description:
      'Callbacks from email relays and voicemail providers under /v3/callbacks/, authenticated by their signatures or secret URLs (the first paths, under /v3/webhooks/, keep working).',
  },
  {
    name: 'Webhook events',
    description:
      "What Hopper posts to your webhook endpoints (Standard Webhooks): every event type with its body, signed with the endpoint's secret. Answer 2xx; anything else is retried with backoff (a `Retry-After` on 429 or 503 is honoured), and 410 Gone disables the endpoint.",
  },
  { name: 'Tracking', description: 'Open and click tracking links and the unsubscribe page, reached by recipients.' },
  { name: 'System', description: 'Health of the service.' },
];

/** `info.description`: what every integrator needs before the first request (Markdown, shown atop /docs). */
export const API_INTRODUCTION = `Hopper is a self-hosted outreach service: **voicemail drops** and **templated emails** sent to \
contacts chosen by tag or by hand, now or later, with delivery counters and a delivery ledger.

## Authentication
Every request under \`/v3\` carries an API key: \`Authorization: Bearer hop_…\`. A key acts with its \
user's role (User, Team Administrator, Administrator); keys are made in the account settings page \
or with \`POST /v3/users/{user_id}/api_keys\`. A missing or revoked key is a 401 with \`WWW-Authenticate\`.

## Paging and filters
Collections answer \`{data, links, meta}\`: \`page\` and \`per_page\` choose the page, \`meta.total\` and \
\`meta.last_page\` tell how many there are, \`links.next\` is the next page (null on the last). Filters \
are named after fields, repeatable, and OR-combined.

## Errors
Every error is an RFC 9457 problem, \`application/problem+json\`: \`type\` (a URL whose page explains \
the problem), \`title\`, \`status\`, \`detail\`, and for invalid fields \`errors\` (\`{field: [reasons]}\`).

## Idempotency
Send \`Idempotency-Key\` (any unique string) on a POST: a retry with the same key gets the first answer \
back (\`Idempotent-Replayed: true\`) instead of doing the work twice, for 24 hours. The same key with \
another request is a 422; while the first still runs, a 409.

## Rate limits
Each key may make a number of requests a minute (600 unless the operator set \`RATE_LIMIT\`), and a \
user twice that across all of their keys (\`RATE_LIMIT_PER_USER\`); requests without a key, and \
those refused as unauthenticated, count against the client address. Every answer carries \
\`RateLimit-Policy\` and \`RateLimit\` (the current IETF draft) and the older \`RateLimit-Limit\`, \
\`RateLimit-Remaining\` and \`RateLimit-Reset\`. Past a limit: 429 with \`Retry-After\`. A 503 (database \
unreachable, server stopping) also says when to retry.

## Webhooks
Register endpoints with \`POST /v3/users/{user_id}/webhooks\` to hear of sends, deliveries, bounces, \
replies and unsubscribes: Hopper posts signed events following Standard Webhooks, retried with backoff. \
Every event type and its body is in this document's \`webhooks\` section (*Webhook events*); \
\`POST /v3/webhooks/{id}/resend\` sends events again after an outage.

## Clients
Each operation shows a \`curl\` line and the same call with Hopper's typed TypeScript client \
(\`clients/typescript\`: \`createHopper({url, key})\`, which adds the Idempotency-Key and retries 429 and \
503 by itself). The \`hopper\` command-line tool imports contacts and lists, sends, cancels and reports \
messages.`;

/** The problems an operation may answer, beyond those its route lists itself. */
function standardErrors(method: string, path: string, hasBody: boolean, authenticated: boolean): number[] {
  const statuses = [405, 503];
  if (authenticated) statuses.push(401, 403, 429);
  if (authenticated || /\{/.test(path)) statuses.push(404);
  if (hasBody) statuses.push(413, 415);
  // Idempotency-Key on every authenticated POST: the key reused while the first runs (409) or with another body (422).
  if (authenticated && method === 'post') statuses.push(409, 422);
  if (hasBody || /\{/.test(path) || method === 'get') statuses.push(400);
  return statuses;
}

const ERROR_RESPONSES: Record<number, { name: string; description: string; headers?: string[]; schema?: string }> = {
  400: {
    name: 'BadRequest',
    description: 'The request is malformed or a field is invalid (`errors` names each field).',
    schema: 'ValidationProblem',
  },
  401: { name: 'Unauthorized', description: 'No API key, or one that is unknown or revoked.', headers: ['WWW-Authenticate'] },
  403: { name: 'Forbidden', description: 'The key may not do this, the account is cancelled, or a signature does not match.' },
  404: { name: 'NotFound', description: 'Nothing with this id exists that the key can reach.' },
  405: { name: 'MethodNotAllowed', description: 'The path exists but not with this method.', headers: ['Allow'] },
  409: {
    name: 'Conflict',
    description:
      'The request clashes with what exists (a contact with this email already exists: the detail names it), or a request with this Idempotency-Key is still running.',
  },
  413: { name: 'PayloadTooLarge', description: 'The body is larger than this route accepts.' },
  415: { name: 'UnsupportedMediaType', description: 'The body is not in a media type this route accepts.' },
  416: {
    name: 'RangeNotSatisfiable',
    description: 'The Range header asks for bytes the file does not have.',
    headers: ['Content-Range', 'Accept-Ranges'],
  },
  422: { name: 'IdempotencyKeyReused', description: 'This Idempotency-Key was used before with a different request.' },
  429: {
    name: 'TooManyRequests',
    description: 'Too many requests for this key; wait as Retry-After says.',
    headers: ['Retry-After'],
  },
  500: { name: 'InternalError', description: 'The server failed; the detail carries an error id for its log.' },
  503: {
    name: 'ServiceUnavailable',
    description: 'The database is unreachable or the server is stopping; retry after Retry-After.',
    headers: ['Retry-After'],
  },
};

const HEADERS: Record<string, Json> = {
  'X-Request-Id': { description: 'The id of this request in the server log (the client may send its own).', schema: { type: 'string' } },
  Location: { description: 'The URL of the created resource.', schema: { type: 'string', format: 'uri' } },
  'WWW-Authenticate': { description: 'The Bearer challenge.', schema: { type: 'string', examples: ['Bearer realm="hopper"'] } },
  Allow: { description: 'The methods the path accepts.', schema: { type: 'string', examples: ['GET, PUT, DELETE'] } },
  'Retry-After': { description: 'Seconds to wait before trying again.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Policy': {
    description:
      'The limits this request is counted against (IETF draft-ietf-httpapi-ratelimit-headers): `"key"` and `"user"` for a request with a key, `"address"` without one; `q` requests per `w` seconds.',
    schema: { type: 'string', examples: ['"key";q=600;w=60, "user";q=1200;w=60'] },
  },
  RateLimit: {
    description: 'What is left of each limit: `r` requests for the next `t` seconds (IETF draft-ietf-httpapi-ratelimit-headers).',
    schema: { type: 'string', examples: ['"key";r=598;t=41, "user";r=1190;t=41'] },
  },
  'RateLimit-Limit': {
    description: 'Requests allowed in the current window, by the limit nearest to being reached (older drafts).',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Remaining': {
    description: 'Requests left in the current window, of that limit (older drafts).',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Reset': { description: 'Seconds until the window resets (older drafts).', schema: { type: 'integer', minimum: 0 } },
  'Idempotent-Replayed': {
    description: 'Present when this is the stored answer to an earlier request with the same Idempotency-Key.',
    schema: { type: 'string', enum: ['true'] },
  },
  'Accept-Ranges': { description: 'Range requests are supported (one range of bytes).', schema: { type: 'string', enum: ['bytes'] } },
  'Content-Range': {
    description: 'On a 416: `bytes */` and the size of the file, which the range asked for lies outside.',
    schema: { type: 'string', examples: ['bytes */96044'] },
  },
};

/** The headers of every answer counted against the rate limit. */
const RATE_LIMIT_HEADERS = ['RateLimit-Policy', 'RateLimit', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'];
/** Refusals made before the request is counted (headers too large): without RateLimit-*. */
const UNCOUNTED = new Set([431]);

const IDEMPOTENCY_KEY: Json = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description: 'Any unique string: a retry with the same key within 24 hours gets the first answer back instead of doing the work twice.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
};

const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` });

const VERBS: Record<string, string> = { get: 'get', put: 'update', patch: 'update', delete: 'delete', head: 'head', post: 'create' };
/** A static last segment after an id that names an action rather than a collection. */
const ACTIONS = new Set(['cancel', 'download', 'import', 'test', 'rotate', 'replay', 'send', 'lift', 'resend']);

function pascal(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((word) => word[0]?.toUpperCase() + word.slice(1))
    .join('');
}

function singular(name: string): string {
  if (name.endsWith('ies')) return `${name.slice(0, -3)}y`;
  if (name.endsWith('s') && !name.endsWith('ss')) return name.slice(0, -1);
  return name;
}

/**
 * `GET /v3/users/{user_id}/voicemail_drops` → `listVoicemailDrops`, `POST` → `createVoicemailDrop`,
 * `GET /v3/voicemail_drops/{id}` → `getVoicemailDrop`, `POST /v3/users/{id}/cancel` → `cancelUser`,
 * `GET /v3/voicemail_drops/{id}/deliveries` → `listVoicemailDropDeliveries`.
 */
export function operationIdFor(method: string, path: string): string {
  if (method === 'head') return `head${pascal(operationIdFor('get', path))}`;
  const parts = path
    .replace(/^\/v3\//, '/')
    .split('/')
    .filter(Boolean);
  // The owner prefix (`/users/{user_id}/…`) does not name the resource.
  if (parts[0] === 'users' && parts[1]?.startsWith('{') && parts.length > 2 && !ACTIONS.has(parts[2] ?? '')) parts.splice(0, 2);
  const last = parts.at(-1) ?? '';
  const endsWithId = last.startsWith('{');
  const statics = parts.filter((part) => !part.startsWith('{'));
  const action = !endsWithId && parts.length > 1 && ACTIONS.has(last) ? last : undefined;
  const nouns = action ? statics.slice(0, -1) : statics;
  const actionOnOne = action !== undefined && Boolean(parts.at(-2)?.startsWith('{'));
  const named = nouns.map((noun, i) => (i < nouns.length - 1 || endsWithId || actionOnOne ? singular(noun) : noun));
  let verb = action ?? VERBS[method] ?? method;
  if (!action && method === 'get' && !endsWithId) verb = 'list';
  if (!action && method === 'post' && endsWithId) verb = 'receive';
  if (!action && method === 'post' && !endsWithId && nouns.length > 0 && path.startsWith('/v3/callbacks')) verb = 'receive';
  // One item created in a collection; a receiver's last segment names its sender (`ses`), not a collection.
  if (verb === 'create' && !endsWithId) named[named.length - 1] = singular(named.at(-1) ?? '');
  if (!path.startsWith('/v3/')) named.unshift('public');
  return verb + pascal(named.join('_'));
}

/** The per-route step (`@fastify/swagger`'s `transform`): marks the routes that need no key. */
export function routeSchema(schema: Json | undefined, route: RouteInfo): Json {
  const result: Json = { ...(schema ?? {}) };
  const isPublic = !route.url.startsWith('/v3/') || route.config?.public === true;
  if (isPublic && !result.security) result.security = [];
  if (result.documentedBody) {
    result.body = result.documentedBody;
    delete result.documentedBody;
  }
  return result;
}

/** The whole-document step (`transformObject`): everything else named above. */
export function finishDocument(doc: Json, options: { generatedCertificate?: string } = {}): Json {
  doc.components ??= {};
  const components: Json = doc.components;
  components.schemas ??= {};
  const schemas: Json = components.schemas;
  components.responses ??= {};
  components.headers = { ...HEADERS, ...(components.headers ?? {}) };
  components.parameters = { ...(components.parameters ?? {}), IdempotencyKey: IDEMPOTENCY_KEY };
  schemas.Problem = PROBLEM;
  schemas.ValidationProblem = VALIDATION_PROBLEM;
  schemas.FieldErrors = FIELD_ERRORS;

  const seen: Seen = { readOnlyByTitle: new Map(), operationIds: new Map(), tags: new Set() };
  for (const [path, item] of Object.entries(doc.paths ?? {}) as [string, Json][]) {
    for (const [method, shared] of Object.entries(item) as [string, Json][]) {
      if (!VERBS[method]) continue;
      // GET and HEAD of one route share their objects.
      const op: Json = structuredClone(shared);
      item[method] = op;
      finishOperation(op, method, path, components, seen);
      op['x-codeSamples'] = codeSamples(method, path, op, isAuthenticated(op), options.generatedCertificate);
    }
  }

  doc.webhooks = webhookOperations();
  seen.tags.add('Webhook events');
  hoistNamedSchemas(doc, schemas, seen.readOnlyByTitle);
  const described = new Map(TAGS.map((tag) => [tag.name, tag]));
  doc.tags = [...seen.tags].sort().map((name) => described.get(name) ?? { name, description: name });
  return doc;
}

/** What the operations seen so far have told: each body schema's read-only fields (by title), the operation ids taken, the tags used. */
interface Seen {
  readOnlyByTitle: Map<string, Set<string>>;
  operationIds: Map<string, string>;
  tags: Set<string>;
}

const isAuthenticated = (op: Json) => !(Array.isArray(op.security) && op.security.length === 0);

/** One operation: its id and description, its read-only body fields, the Idempotency-Key, and its answers. */
function finishOperation(op: Json, method: string, path: string, components: Json, seen: Seen): void {
  if (method === 'head' && op.operationId) op.operationId = `head${pascal(op.operationId)}`;
  op.operationId ??= operationIdFor(method, path);
  const clash = seen.operationIds.get(op.operationId);
  if (clash) throw new Error(`operationId ${op.operationId} of ${method.toUpperCase()} ${path} is also ${clash}'s; set one on the route`);
  seen.operationIds.set(op.operationId, `${method.toUpperCase()} ${path}`);
  op.description ??= op.summary;
  for (const tag of op.tags ?? []) seen.tags.add(tag);
  const authenticated = isAuthenticated(op);
  const readOnly = markReadOnlyFields(op);
  // Every authenticated POST takes an Idempotency-Key (idempotency.ts).
  const idempotent = authenticated && method === 'post';
  if (idempotent) op.parameters = [...(op.parameters ?? []), { $ref: '#/components/parameters/IdempotencyKey' }];

  op.responses ??= {};
  const responses: Json = op.responses;
  if (!Object.keys(responses).some((code) => code.startsWith('2') || code.startsWith('3'))) responses[200] = {};
  for (const [status, response] of Object.entries(responses) as [string, Json][]) {
    const code = Number(status);
    if (code >= 200 && code < 300) finishSuccess(response, code, op, method, idempotent);
    if (code >= 200 && code < 300 && readOnly.size > 0) {
      for (const media of Object.values(response.content ?? {}) as Json[]) {
        const title = media.schema?.title ?? media.schema?.properties?.data?.items?.title;
        if (!title) continue;
        const names = seen.readOnlyByTitle.get(title) ?? new Set<string>();
        for (const name of readOnly) names.add(name);
        seen.readOnlyByTitle.set(title, names);
      }
    }
  }
  const errorStatuses = new Set([
    ...Object.keys(responses)
      .map(Number)
      .filter((code) => code >= 400),
    ...standardErrors(method, path, Boolean(op.requestBody), authenticated),
  ]);
  for (const code of [...errorStatuses].sort()) {
    // A page for people (the unsubscribe page's 404) keeps the content its route declares.
    const own: Json | undefined = responses[code];
    if (own?.content && Object.keys(own.content).every((type) => !type.includes('json'))) {
      own.headers = { 'X-Request-Id': headerRef('X-Request-Id'), ...(own.headers ?? {}) };
      if (!UNCOUNTED.has(code)) for (const name of RATE_LIMIT_HEADERS) own.headers[name] = headerRef(name);
      continue;
    }
    const known = ERROR_RESPONSES[code];
    if (!known) throw new Error(`${method.toUpperCase()} ${path} answers ${code}, which the document does not describe`);
    components.responses[known.name] ??= errorResponse(code, known);
    responses[code] = { $ref: `#/components/responses/${known.name}` };
  }
  op.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * The read-only fields WritableBody ignores (`{}`) in an operation's request bodies: they stay
 * declared, marked readOnly (ignored when sent), so that what a read answers can be sent back as
 * the server allows. Returns their names.
 */
function markReadOnlyFields(op: Json): Set<string> {
  const readOnly = new Set<string>();
  for (const media of Object.values(op.requestBody?.content ?? {}) as Json[]) {
    const properties: Json | undefined = media.schema?.properties;
    for (const [name, schema] of Object.entries(properties ?? {})) {
      if (schema && typeof schema === 'object' && Object.keys(schema).length === 0) {
        readOnly.add(name);
        if (properties) properties[name] = { readOnly: true, description: 'Read-only: ignored when sent' };
      }
    }
    // A form read part by part declares no `type` (so the parsed body is not checked); it is an object all the same.
    if (media.schema?.properties && media.schema.type === undefined) media.schema = { type: 'object', ...media.schema };
  }
  return readOnly;
}

/** A 2xx answer: its description, and the headers every answer of its kind carries. */
function finishSuccess(response: Json, code: number, op: Json, method: string, idempotent: boolean): void {
  if (!response.description || response.description === 'Default Response') response.description = successDescription(code, op);
  const headers: Json = { ...(response.headers ?? {}), 'X-Request-Id': headerRef('X-Request-Id') };
  if (code === 201) headers.Location = headerRef('Location');
  // Every answer is counted against a rate limit: its key's, or its address's (rate-limit.ts).
  for (const name of RATE_LIMIT_HEADERS) headers[name] = headerRef(name);
  if (idempotent) headers['Idempotent-Replayed'] = headerRef('Idempotent-Replayed');
  response.headers = headers;
  // HEAD answers carry the headers of GET without its body.
  if (method === 'head') delete response.content;
}

/** The Standard Webhooks headers of every post, as header parameters of the `webhooks` operations. */
const SIGNATURE_HEADERS: Json[] = [
  {
    name: 'webhook-id',
    in: 'header',
    required: true,
    description: "The event's id (`msg_…`): the same on every retry and resend of it to this endpoint; deduplicate on it.",
    schema: { type: 'string', pattern: '^msg_[0-9a-f]{32}$', examples: ['msg_5f8c0e6b2d4a4f1e9b7c3a2d1e0f9a8b'] },
  },
  {
    name: 'webhook-timestamp',
    in: 'header',
    required: true,
    description: 'When this attempt was signed, in Unix seconds: refuse one more than five minutes away from your clock.',
    schema: { type: 'string', pattern: '^[0-9]+$', examples: ['1783875360'] },
  },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description:
      "`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` with the endpoint's secret (the bytes after `whsec_`, base64-decoded); during a rotation, two of them separated by a space.",
    schema: { type: 'string', examples: ['v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='] },
  },
];

/** OpenAPI 3.1 `webhooks`: one operation per event type, its body the event's schema (webhooks/event-schemas.ts). */
function webhookOperations(): Json {
  const section: Json = {};
  for (const { type, schema, resource } of EVENT_SCHEMAS) {
    const body: Json = JSON.parse(JSON.stringify(schema));
    const example = { ...(exampleOf({ ...body, title: undefined }) as Json), type };
    section[type] = {
      post: {
        operationId: `${type.replace(/[._](\w)/g, (_m, c: string) => c.toUpperCase())}Event`,
        summary: type,
        description: `Posted to each endpoint subscribed to \`${type}\` (a ${resource} event; docs/webhooks.md lists when each is sent).`,
        tags: ['Webhook events'],
        security: [],
        parameters: SIGNATURE_HEADERS,
        requestBody: {
          required: true,
          description: 'The event, signed as the headers say; verify it on the raw bytes.',
          content: {
            'application/json': {
              schema: { allOf: [body, { type: 'object', properties: { type: { const: type } } }] },
              examples: { [type]: { summary: `A ${type} event`, value: example } },
            },
          },
        },
        responses: {
          200: { description: 'Received (any 2xx)' },
          410: {
            description:
              "Gone: Hopper disables the endpoint at once and tells the user's other endpoints (`endpoint.disabled`) and the user by email.",
          },
          429: {
            description: 'Retried, no sooner than `Retry-After` says (so is a 503); any other answer is retried with backoff.',
            headers: { 'Retry-After': headerRef('Retry-After') },
          },
        },
      },
    };
  }
  return section;
}

/** The audio file of the upload samples: the one the README's walk-through makes (six seconds of WAV). */
const AUDIO_FILE = 'open-house.wav';

/**
 * An operation's call in curl and with the typed client (Redoc shows `x-codeSamples` beside it).
 * While the server answers with the certificate it generated for itself, the curl line trusts that
 * file by its absolute path, so that it runs as pasted from any directory.
 */
function codeSamples(method: string, path: string, op: Json, authenticated: boolean, certificate: string | undefined): Json[] {
  const parameters: Json[] = op.parameters ?? [];
  const pathParams = parameters.filter((p) => p.in === 'path').map((p) => p.name as string);
  const url = `$HOPPER_URL${path.replace(/\{(\w+)\}/g, '1')}`;
  const [type, media] = (Object.entries(op.requestBody?.content ?? {})[0] ?? []) as [string | undefined, Json | undefined];
  // A schema's `examples` are moved to its media type (`example`) by @fastify/swagger.
  const given = media?.example ?? (Object.values(media?.examples ?? {})[0] as Json | undefined)?.value;
  const body = type === 'application/json' ? (given ?? exampleOf(media?.schema)) : undefined;
  const verb = method.toUpperCase();

  const curl = [`curl${verb === 'GET' ? '' : verb === 'HEAD' ? ' -I' : ` -X ${verb}`} "${url}"`];
  if (certificate) curl.push(`--cacert ${shellWord(certificate)}`);
  if (authenticated) curl.push('-H "Authorization: Bearer $HOPPER_KEY"');
  if (type === 'application/json') curl.push("-H 'Content-Type: application/json'", `-d '${JSON.stringify(body)}'`);
  else if (type === 'multipart/form-data') curl.push(`-F file=@${AUDIO_FILE}`, '-F name=open-house');
  else if (type) curl.push(`-H 'Content-Type: ${type}'`, '--data-binary @contacts.csv');
  const made = type === 'multipart/form-data' ? `# ${AUDIO_FILE}: six seconds of audio, made as the README's walk-through shows\n` : '';
  const samples: Json[] = [{ lang: 'Shell', label: 'curl', source: made + curl.join(' \\\n  ') }];
  if (!authenticated || method === 'head') return samples;

  const options: string[] = [];
  if (pathParams.length > 0) options.push(`params: { path: { ${pathParams.map((name) => `${name}: 1`).join(', ')} } }`);
  if (type === 'application/json') options.push(`body: ${JSON.stringify(body)}`);
  else if (type === 'multipart/form-data') options.push('body: form as never, bodySerializer: (form) => form');
  else if (type)
    options.push(`body: await readFile('contacts.csv', 'utf8'), bodySerializer: (text) => text, headers: { 'content-type': '${type}' }`);
  const call = `hopper.api.${verb}('${path}'${options.length > 0 ? `, { ${options.join(', ')} }` : ''})`;
  const paged = method === 'get' && op.operationId?.startsWith('list');
  const lines = [
    ...(type && type !== 'application/json' ? ["import { readFile } from 'node:fs/promises';"] : []),
    `import { createHopper${paged ? '' : ', unwrap'} } from '@hopper/client';`,
    '',
    "const hopper = createHopper({ url: process.env.HOPPER_URL ?? '', key: process.env.HOPPER_KEY ?? '' });",
  ];
  if (type === 'multipart/form-data') {
    lines.push(
      `// ${AUDIO_FILE}: six seconds of audio, made as the README's walk-through shows`,
      'const form = new FormData();',
      `form.append('file', new Blob([await readFile('${AUDIO_FILE}')]), '${AUDIO_FILE}');`,
      "form.append('name', 'open-house');",
    );
  }
  if (paged) {
    const params = pathParams.length > 0 ? `{ path: { ${pathParams.map((name) => `${name}: 1`).join(', ')} } }` : '{}';
    lines.push(`// Every item of every page:`, `for await (const item of hopper.paginate('${path}', ${params})) console.log(item);`);
  } else {
    lines.push(`const answer = await unwrap(${call});`);
  }
  samples.push({ lang: 'TypeScript', label: 'Typed client', source: lines.join('\n') });
  return samples;
}

/** A path as one shell word: bare when it holds nothing the shell reads, else single-quoted. */
function shellWord(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}

/** Values that pass the rules of the fields they name, where a schema has no example. */
const SAMPLE_VALUES: Record<string, unknown> = {
  callback_number: '7272329117',
  phone: '7272329117',
  email: 'ana@example.com',
  name: 'Spring open house',
  subject: 'Spring open house',
  provider: 'Sandbox',
  url: 'https://crm.example.com/hopper',
};

/** A body built from the schema's examples, its required fields only. */
function exampleOf(schema: Json | undefined): unknown {
  if (!schema || typeof schema !== 'object') return null;
  if (schema.examples?.[0] !== undefined) return schema.examples[0];
  if (schema.example !== undefined) return schema.example;
  if (schema.enum) return schema.enum[0];
  if (schema.const !== undefined) return schema.const;
  const first = schema.anyOf?.[0] ?? schema.oneOf?.[0];
  if (first) return exampleOf(first.type === 'null' ? (schema.anyOf ?? schema.oneOf)[1] : first);
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type;
  switch (type) {
    case 'object': {
      const required = new Set<string>(schema.required ?? []);
      return Object.fromEntries(
        Object.entries(schema.properties ?? {})
          .filter(([name]) => required.has(name))
          .map(([name, property]) => [name, SAMPLE_VALUES[name] ?? exampleOf(property as Json)]),
      );
    }
    case 'array':
      return (schema.minItems ?? 0) > 0 ? [exampleOf(schema.items)] : [];
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return true;
    case 'string':
      if (schema.format === 'date-time') return '2026-07-12T16:56:00Z';
      if (schema.format === 'email') return 'ana@example.com';
      if (schema.format === 'uri') return 'https://example.com/';
      return 'text';
    default:
      return null;
  }
}

function successDescription(code: number, op: Json): string {
  if (code === 201) return 'Created; `Location` is its URL';
  if (code === 206) return 'Part of the file, as the Range header asked';
  if (op.requestBody || op.operationId?.startsWith('delete')) return 'Done';
  return 'Found';
}

function errorResponse(code: number, known: (typeof ERROR_RESPONSES)[number]): Json {
  const headers: Json = { 'X-Request-Id': headerRef('X-Request-Id') };
  for (const name of known.headers ?? []) headers[name] = headerRef(name);
  if (!UNCOUNTED.has(code)) for (const name of RATE_LIMIT_HEADERS) headers[name] = headerRef(name);
  return {
    description: known.description,
    headers,
    content: { 'application/problem+json': { schema: { $ref: `#/components/schemas/${known.schema ?? 'Problem'}` } } },
  };
}

/** Every schema with a `title` becomes `components.schemas[title]`, referenced wherever it appeared. */
function hoistNamedSchemas(doc: Json, schemas: Json, readOnlyByTitle: Map<string, Set<string>>): void {
  const visit = (node: unknown, inComponent: string | undefined): unknown => {
    if (Array.isArray(node)) return node.map((child) => visit(child, inComponent));
    if (!node || typeof node !== 'object') return node;
    const object = node as Json;
    const copy: Json = {};
    for (const [key, value] of Object.entries(object))
      copy[key] = key === 'examples' || key === 'example' ? value : visit(value, inComponent);
    const title = typeof copy.title === 'string' && copy.type !== undefined ? copy.title : undefined;
    if (!title || title === inComponent) return copy;
    for (const name of readOnlyByTitle.get(title) ?? []) {
      if (copy.properties?.[name] && !copy.properties[name].$ref) copy.properties[name] = { ...copy.properties[name], readOnly: true };
      else if (copy.properties?.[name]?.$ref) copy.properties[name] = { allOf: [copy.properties[name]], readOnly: true };
    }
    const { title: _title, ...rest } = copy;
    const existing = schemas[title];
    if (existing && !isDeepStrictEqual(existing, rest)) {
      throw new Error(`Two different schemas are titled ${title}; give one of them another title`);
    }
    schemas[title] = rest;
    return { $ref: `#/components/schemas/${title}` };
  };
  doc.paths = visit(doc.paths, undefined);
  doc.webhooks = visit(doc.webhooks, undefined);
  for (const [name, schema] of Object.entries(schemas)) schemas[name] = visit(schema, name);
}

const problemTypes = Object.keys(PROBLEMS);

const PROBLEM: Json = {
  type: 'object',
  description: 'RFC 9457 problem details, with the Laravel-compatible `message`.',
  required: ['type', 'title', 'status', 'detail', 'message'],
  properties: {
    type: {
      type: 'string',
      format: 'uri',
      description: `A URL naming the problem, ending in one of: ${problemTypes.join(', ')}. It answers with a page explaining the problem.`,
    },
    title: { type: 'string', description: 'The problem in a few words, the same for every occurrence.' },
    status: { type: 'integer', description: 'The HTTP status.' },
    detail: { type: 'string', description: 'What went wrong this time.' },
    message: { type: 'string', description: 'The same as detail.' },
    errors: { $ref: '#/components/schemas/FieldErrors' },
  },
  examples: [
    {
      type: 'https://hopper.example/problems/not_found',
      title: 'Not found',
      status: 404,
      detail: 'Voicemail drop 42 does not exist.',
      message: 'Voicemail drop 42 does not exist.',
    },
  ],
};

const FIELD_ERRORS: Json = {
  type: 'object',
  description: 'For each invalid field (dot notation for nested ones), what is wrong with it.',
  additionalProperties: { type: 'array', items: { type: 'string' } },
};

const VALIDATION_PROBLEM: Json = {
  type: 'object',
  description: 'A problem about the request; `errors` names each invalid field when there are any.',
  required: ['type', 'title', 'status', 'detail', 'message'],
  properties: { ...PROBLEM.properties },
  examples: [
    {
      type: 'https://hopper.example/problems/validation',
      title: 'Invalid request',
      status: 400,
      detail: 'The name field is required.',
      message: 'The name field is required.',
      errors: { name: ['The name field is required.'] },
    },
  ],
};
