import { randomUUID } from 'node:crypto';
import createClient, { type Client, type FetchResponse } from 'openapi-fetch';
import { Webhook as StandardWebhook } from 'standardwebhooks';
// A type-only import, erased at run time: `.js` names the built file that the declarations sit beside.
import type { components, paths, webhooks } from './schema.js';

/**
 * The typed client of Hopper's /v3 API: `schema.ts` is generated from the served OpenAPI document
 * (`npm run generate -w clients/typescript`; CI checks it is current), wrapped with openapi-fetch.
 * Every POST carries an Idempotency-Key (kept across its retries); 429 and 503 answers and dropped
 * connections are retried with backoff, honouring Retry-After; errors are thrown as `HopperProblem`.
 */

export type Schemas = components['schemas'];
/**
 * A schema as openapi-fetch types an answer that holds it (its `Readable`, which leaves out a field
 * whose only value is `null`, such as a templated email's `exclusions`): so what `unwrap` returns
 * is assignable to the named type below.
 */
type Answered<T> = NonNullable<
  FetchResponse<{ responses: { 200: { content: { 'application/json': T } } } }, unknown, 'application/json'>['data']
>;
export type VoicemailDrop = Answered<Schemas['VoicemailDrop']>;
export type TemplatedEmail = Answered<Schemas['TemplatedEmail']>;
export type Contact = Answered<Schemas['Contact']>;
export type Tag = Answered<Schemas['Tag']>;
export type Signature = Answered<Schemas['Signature']>;
export type TemplatedMessage = Answered<Schemas['TemplatedMessage']>;
export type Media = Answered<Schemas['Media']>;
export type User = Answered<Schemas['User']>;
export type Delivery = Answered<Schemas['Delivery']>;
export type TemplatedEmailReply = Answered<Schemas['TemplatedEmailReply']>;
export type Team = Answered<Schemas['Team']>;
export type ApiKey = Answered<Schemas['ApiKey']>;
/** An API key as created: `key` appears in this answer only. */
export type NewApiKey = Answered<Schemas['NewApiKey']>;
export type Webhook = Answered<Schemas['Webhook']>;
/** A webhook endpoint as created or rotated: `secret` appears in these answers only. */
export type WebhookWithSecret = Answered<Schemas['WebhookWithSecret']>;
export type WebhookDelivery = Answered<Schemas['WebhookDelivery']>;
export type Problem = Schemas['Problem'];
export type ContactImportResult = Answered<Schemas['ContactImportResult']>;
export type { components, paths, webhooks };

/** The body of every event Hopper posts to a webhook endpoint (the OpenAPI document's `webhooks`), told apart by `type`. */
export type WebhookEvent =
  | Schemas['TemplatedEmailEvent']
  | Schemas['VoicemailDropEvent']
  | Schemas['DeliveryEvent']
  | Schemas['ContactEvent']
  | Schemas['WebhookTestEvent']
  | Schemas['EndpointDisabledEvent'];
export type WebhookEventType = WebhookEvent['type'];

/** An RFC 9457 problem answered by Hopper, thrown by `unwrap` and the iterators; `message` is its `detail`. */
export class HopperProblem extends Error {
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly errors: Record<string, string[]> | undefined;

  constructor(problem: Problem) {
    super(problem.detail);
    this.name = 'HopperProblem';
    this.status = problem.status;
    this.type = problem.type;
    this.title = problem.title;
    this.detail = problem.detail;
    this.errors = problem.errors;
  }
}

export interface HopperOptions {
  /** The server, e.g. https://hopper.example.org (a trailing /v3 is accepted). */
  url: string;
  key: string;
  /** Attempts for one request, the first included (default 5). */
  attempts?: number;
  /** The first backoff in milliseconds when no Retry-After is given (default 500), doubled each time. */
  backoffMs?: number;
  fetch?: typeof globalThis.fetch;
}

export interface Hopper {
  /** The openapi-fetch client: `api.GET('/v3/voicemail_drops/{id}', { params: { path: { id } } })`. */
  api: Client<paths>;
  /** Every item of a paged collection, page after page. */
  paginate<P extends PagedPath>(path: P, params: PagedParams<P>): AsyncGenerator<PagedItem<P>>;
}

type PagedPath = {
  [P in keyof paths]: paths[P] extends { get: { responses: { 200: { content: { 'application/json': { meta: { last_page: number } } } } } } }
    ? P
    : never;
}[keyof paths];
type PagedGet<P extends PagedPath> = paths[P]['get'];
type PagedParams<P extends PagedPath> = PagedGet<P> extends { parameters: infer Q } ? Q : never;
type PagedItem<P extends PagedPath> =
  PagedGet<P> extends {
    responses: { 200: { content: { 'application/json': { data: (infer I)[] } } } };
  }
    ? I
    : never;

/** The data of an openapi-fetch answer, or its problem thrown. */
export async function unwrap<T>(answer: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await answer;
  if (error !== undefined || !response.ok) throw toProblem(error, response);
  return data as T;
}

function toProblem(error: unknown, response: Response): HopperProblem {
  if (error && typeof error === 'object' && 'status' in error && 'detail' in error) return new HopperProblem(error as Problem);
  return new HopperProblem({
    type: 'about:blank',
    title: response.statusText,
    status: response.status,
    detail: String(error ?? response.statusText),
    message: '',
  });
}

export function createHopper(options: HopperOptions): Hopper {
  const baseUrl = options.url.replace(/\/+$/, '').replace(/\/v3$/, '');
  const api = createClient<paths>({
    baseUrl,
    headers: { authorization: `Bearer ${options.key}` },
    fetch: retrying(options.fetch ?? globalThis.fetch, options.attempts ?? 5, options.backoffMs ?? 500),
  });
  return {
    api,
    async *paginate(path, params) {
      for (let page = 1; ; page++) {
        const query = { ...((params as { query?: object }).query ?? {}), page };
        // biome-ignore lint/suspicious/noExplicitAny: the path is one of the paged ones, checked by the signature.
        const body = (await unwrap((api.GET as any)(path, { params: { ...(params as object), query } }))) as {
          data: never[];
          meta: { last_page: number };
        };
        yield* body.data;
        if (page >= body.meta.last_page) return;
      }
    },
  };
}

const RETRIED = new Set([429, 503]);
/**
 * Failures that trying again does not mend: nothing listens there, no such host, a certificate not
 * trusted. They are thrown at once (a dropped connection is still tried again).
 */
const FINAL_CAUSES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_SSL_WRONG_VERSION_NUMBER',
]);

function isRetriable(error: unknown): boolean {
  const code = (error as { cause?: { code?: string } })?.cause?.code;
  return !(code && FINAL_CAUSES.has(code));
}

/** A fetch that retries 429/503 and dropped connections; a POST keeps one Idempotency-Key throughout. */
export function retrying(fetch: typeof globalThis.fetch, attempts: number, backoffMs: number): (request: Request) => Promise<Response> {
  return async (request) => {
    const headers = new Headers(request.headers);
    if (request.method === 'POST' && !headers.has('idempotency-key')) headers.set('idempotency-key', randomUUID());
    const body = request.body ? await request.arrayBuffer() : undefined;
    for (let attempt = 1; ; attempt++) {
      let response: Response | undefined;
      try {
        response = await fetch(new Request(request.url, { method: request.method, headers, body, signal: request.signal }));
      } catch (error) {
        if (attempt >= attempts || request.signal.aborted || !isRetriable(error)) throw error;
      }
      if (response && (!RETRIED.has(response.status) || attempt >= attempts)) return response;
      await response?.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, delay(response, attempt, backoffMs)));
    }
  };
}

function delay(response: Response | undefined, attempt: number, backoffMs: number): number {
  const retryAfter = response?.headers.get('retry-after');
  if (retryAfter) {
    const seconds = Number(retryAfter);
    const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(retryAfter) - Date.now();
    if (Number.isFinite(ms)) return Math.min(Math.max(ms, 0), 60_000);
  }
  return backoffMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2);
}

/**
 * Checks a post of Hopper's webhooks (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
 * `webhook-signature`) against the endpoint's `whsec_…` secret, and returns its event. Throws when
 * the signature does not match or the timestamp is more than 5 minutes away. `body` is the raw
 * body as received, before any JSON parsing.
 */
export function verifyWebhook(
  secret: string,
  body: string | Uint8Array,
  headers: Record<string, string | string[] | undefined> | Headers,
): WebhookEvent {
  const get = (name: string): string => {
    const value = headers instanceof Headers ? headers.get(name) : headers[name];
    return (Array.isArray(value) ? value[0] : value) ?? '';
  };
  const signed = {
    'webhook-id': get('webhook-id'),
    'webhook-timestamp': get('webhook-timestamp'),
    'webhook-signature': get('webhook-signature'),
  };
  return new StandardWebhook(secret).verify(typeof body === 'string' ? body : new TextDecoder().decode(body), signed) as WebhookEvent;
}
