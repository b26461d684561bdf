import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths, webhooks } from './schema.ts';

/**
 * The typed client of Hopper's /v3 API: `schema.ts` is generated from the served OpenAPI document
 * (`npm run generate -w clients/typescript`; CI checks it is current), wrapped with openapi-fetch.
 * Every POST carries an Idempotency-Key (kept across its retries); 429 and 503 answers and dropped
 * connections are retried with backoff, honouring Retry-After; errors are thrown as `HopperProblem`.
 */

export type Schemas = components['schemas'];
export type VoicemailDrop = Schemas['VoicemailDrop'];
export type TemplatedEmail = Schemas['TemplatedEmail'];
export type Contact = Schemas['Contact'];
export type Tag = Schemas['Tag'];
export type Signature = Schemas['Signature'];
export type TemplatedMessage = Schemas['TemplatedMessage'];
export type Media = Schemas['Media'];
export type User = Schemas['User'];
export type Delivery = Schemas['Delivery'];
export type TemplatedEmailReply = Schemas['TemplatedEmailReply'];
export type Team = Schemas['Team'];
export type ApiKey = Schemas['ApiKey'];
/** An API key as created: `key` appears in this answer only. */
export type NewApiKey = Schemas['NewApiKey'];
export type Webhook = Schemas['Webhook'];
/** A webhook endpoint as created or rotated: `secret` appears in these answers only. */
export type WebhookWithSecret = Schemas['WebhookWithSecret'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type Problem = Schemas['Problem'];
export type ContactImportResult = Schemas['ContactImportResult'];
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

/** A post whose signature, or timestamp, does not hold. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/**
 * Checks a post from Hopper (Standard Webhooks) and returns its event: the HMAC-SHA256 of
 * `webhook-id.webhook-timestamp.body` under the endpoint's `whsec_…` secret must be one of the
 * `webhook-signature` values, and the timestamp within `toleranceSeconds` (5 minutes) of now.
 * `body` is the raw body as received (a string or its bytes), never a re-serialised object.
 */
export function verifyWebhook(
  secret: string,
  body: string | Uint8Array,
  headers: Headers | Record<string, string | string[] | undefined>,
  options: { toleranceSeconds?: number; now?: Date } = {},
): WebhookEvent {
  const header = (name: string) => {
    const value = headers instanceof Headers ? headers.get(name) : headers[name];
    return Array.isArray(value) ? value[0] : (value ?? undefined);
  };
  const id = header('webhook-id');
  const timestamp = header('webhook-timestamp');
  const signatures = header('webhook-signature');
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError('missing webhook-id, webhook-timestamp or webhook-signature');
  const seconds = Number(timestamp);
  const now = (options.now ?? new Date()).getTime() / 1000;
  if (!/^\d+$/.test(timestamp) || Math.abs(now - seconds) > (options.toleranceSeconds ?? 300)) {
    throw new WebhookVerificationError('the webhook-timestamp is too far from now');
  }
  const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${text}`).digest();
  const matches = signatures.split(' ').some((candidate) => {
    const [version, value] = candidate.split(',', 2);
    if (version !== 'v1' || !value) return false;
    const given = Buffer.from(value, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) throw new WebhookVerificationError('no webhook-signature matches');
  return JSON.parse(text) as WebhookEvent;
}

/** An RFC 9457 problem answered by Hopper, thrown by `unwrap` and the iterators. */
export class HopperProblem extends Error {
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly errors: Record<string, string[]> | undefined;

  constructor(problem: Problem) {
    super(problem.detail);
    this.name = 'HopperProblem';
    this.status = problem.status;
    this.type = problem.type;
    this.title = problem.title;
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
        if (attempt >= attempts || request.signal.aborted) throw error;
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
