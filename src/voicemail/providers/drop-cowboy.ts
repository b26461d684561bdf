import type { FastifyBaseLogger } from 'fastify';
import type { DropCowboyConfig } from '../../config.ts';
import type { Db } from '../../db/database.ts';
import { retryAfterMs } from '../../net/retry-after.ts';
import { type Clock, realTimeMs } from '../../time.ts';
import { type DropSubmission, describeFetchError, type SubmitOutcome, type SubmitResult, type VoicemailAdapter } from '../providers.ts';
import { ensureSubmission, freezeRequestBody, noteAccepted, remoteMediaId, saveRemoteMediaId } from '../submissions.ts';

/**
 * Drop Cowboy, API v2, as its own repository documents it (`Drop-Cowboy/dropcowboy`,
 * examples/api/CONTRACT.md and docs/concepts/*.md; summarised in PROVIDERS.md):
 *
 * - every call carries `x-key`/`x-secret`; routes hang off DROPCOWBOY_URL;
 * - `POST /rvm` with `Idempotency-Key: <UUID v4>`, the same key (and the same body) on every try
 *   of one delivery, kept in `provider_submissions`; answered `202 {status: "queued", message_id}`
 *   before anything is checked;
 * - the body: `to` (E.164), `phone_line_id` (retail: DROPCOWBOY_PHONE_LINE_ID or the account's
 *   default line) or `caller_id` (bring-your-own-carrier only), exactly one audio field —
 *   `media_id` of the item uploaded once to Drop Cowboy's media library, or `audio_url` where
 *   support enabled it — `foreign_id` (the delivery) and `callback_url` with a secret token;
 * - media import by URL: `POST /media/public/media {name, type: "rvm", url, ext}` →
 *   `{data: {media_id}}`; lines: `GET /phone/public/lines` → `data[]` with `type` and
 *   `is_default`/`default`: the default *voice* line (its `lookups.js`), never an SMS line;
 * - a 429 carries `Retry-After`: nothing goes to the account before it has passed (AccountPace).
 *
 * The body of a delivery's first `POST /rvm` is kept with its key (`provider_submissions.request_body`)
 * and every retry sends those bytes again, whatever the configuration (line, BYOC, audio_url) says
 * by then: the same key with another body is refused (3027) and drops nothing.
 */
const SUBMIT_TIMEOUT_MS = 30_000;
const IMPORT_TIMEOUT_MS = 120_000;
const EXTENSIONS: Record<string, string> = { wav: '.wav', mp3: '.mp3' };
/** How long a failed media import answers for its media item without asking again: refused, and not reached (or 5xx). */
const IMPORT_REFUSED_MEMORY_MS = 60_000;
const IMPORT_FAILED_MEMORY_MS = 1_000;

/** An answer of Drop Cowboy's: its status, its JSON body (an object), and a 429's Retry-After. */
interface Reply {
  status: number;
  ok: boolean;
  json: Record<string, unknown> | undefined;
  retryAfterMs: number | undefined;
}

export class DropCowboyAdapter implements VoicemailAdapter {
  readonly provider = 'Drop Cowboy';
  readonly #config: DropCowboyConfig;
  readonly #publicUrl: string;
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #log: FastifyBaseLogger;
  readonly #headers: Record<string, string>;
  // Uploads in progress in this process, by media id: the deliveries of a drop upload once, and a
  // failed upload answers for a while (IMPORT_*_MEMORY_MS) instead of one try per delivery.
  readonly #uploads = new Map<number, Promise<string>>();
  #defaultLine: Promise<string | undefined> | undefined;
  readonly #pace = new AccountPace();

  constructor(config: DropCowboyConfig, publicUrl: string, db: Db, clock: Clock, log: FastifyBaseLogger) {
    this.#config = config;
    this.#publicUrl = publicUrl;
    this.#db = db;
    this.#clock = clock;
    this.#log = log;
    this.#headers = { 'content-type': 'application/json', accept: 'application/json', 'x-key': config.key, 'x-secret': config.secret };
  }

  async submit(drop: DropSubmission): Promise<SubmitResult> {
    const to = `+1${drop.phone}`;
    const submission = await ensureSubmission(this.#db, { deliveryId: drop.deliveryId, provider: 'Drop Cowboy', phone: to }, this.#clock());
    // A retry: the bytes first sent under this key, whatever the configuration says now.
    const body = submission.request_body ?? (await this.#firstBody(drop, to, submission.callback_token));
    if (typeof body !== 'string') return body;
    return this.#send(drop, body, submission.idempotency_key);
  }

  async #call(method: 'GET' | 'POST', path: string, body: unknown, timeoutMs: number, extra: Record<string, string> = {}): Promise<Reply> {
    const waitMs = this.#pace.waitMs();
    // A long pause is not waited out holding the delivery: it is tried again once the pause is over.
    if (waitMs > MAX_WAIT_MS) {
      throw new CallError(
        429,
        `Drop Cowboy asked Hopper to slow down (HTTP 429): nothing is sent for ${Math.ceil(waitMs / 1000)} s`,
        waitMs,
      );
    }
    await this.#pace.turn();
    const response = await fetch(`${this.#config.url}${path}`, {
      method,
      headers: { ...this.#headers, ...extra },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    const asked = response.status === 429 ? retryAfterMs(response.headers.get('retry-after')) : null;
    const retryAfter = asked === null ? undefined : Math.min(MAX_RETRY_AFTER_MS, asked);
    if (response.status === 429) {
      this.#pace.slowDown(retryAfter);
      this.#log.warn({ path, retryAfterMs: retryAfter }, 'Drop Cowboy answered 429: the account slows down');
    } else if (response.ok) this.#pace.ease();
    return { status: response.status, ok: response.ok, json: parseJson(text), retryAfterMs: retryAfter };
  }

  async #mediaIdFor(drop: DropSubmission): Promise<string> {
    const known = await remoteMediaId(this.#db, 'Drop Cowboy', drop.mediaId);
    if (known) return known;
    const uploads = this.#uploads;
    let upload = uploads.get(drop.mediaId);
    if (!upload) {
      upload = this.#upload(drop);
      uploads.set(drop.mediaId, upload);
      const mine = upload;
      const forget = (afterMs: number) => {
        const timer = setTimeout(() => uploads.get(drop.mediaId) === mine && uploads.delete(drop.mediaId), afterMs);
        timer.unref();
      };
      upload.then(
        () => uploads.delete(drop.mediaId),
        (error: unknown) =>
          forget(error instanceof CallError && !retryableStatus(error.status) ? IMPORT_REFUSED_MEMORY_MS : IMPORT_FAILED_MEMORY_MS),
      );
    }
    return upload;
  }

  /** Imports a drop's audio into Drop Cowboy's media library by its public URL; its media id there. */
  async #upload(drop: DropSubmission): Promise<string> {
    const reply = await this.#call(
      'POST',
      '/media/public/media',
      { name: `hopper-${drop.mediaId}${EXTENSIONS[drop.audioType]}`, type: 'rvm', url: drop.audioUrl, ext: EXTENSIONS[drop.audioType] },
      IMPORT_TIMEOUT_MS,
    );
    const data = isObject(reply.json?.data) ? reply.json.data : undefined;
    const mediaId = data?.media_id;
    if (!reply.ok || typeof mediaId !== 'string' || mediaId === '') {
      throw new CallError(
        reply.status,
        `Drop Cowboy did not import the audio into its media library (HTTP ${reply.status}${problemText(reply.json)})`,
      );
    }
    await saveRemoteMediaId(this.#db, 'Drop Cowboy', drop.mediaId, mediaId, this.#clock());
    this.#log.info({ mediaId: drop.mediaId, remoteMediaId: mediaId }, 'audio uploaded to the Drop Cowboy media library');
    return mediaId;
  }

  #lineId(): Promise<string | undefined> {
    if (this.#config.phoneLineId) return Promise.resolve(this.#config.phoneLineId);
    if (!this.#defaultLine) {
      const lookUp = (async () => {
        const reply = await this.#call('GET', '/phone/public/lines', undefined, SUBMIT_TIMEOUT_MS);
        if (!reply.ok)
          throw new CallError(reply.status, `Drop Cowboy did not list the phone lines (HTTP ${reply.status}${problemText(reply.json)})`);
        const line = defaultVoiceLine(listOf(reply.json));
        const id = line?.ivr_id ?? line?.phone_line_id ?? line?.id;
        return typeof id === 'string' && id !== '' ? id : undefined;
      })();
      this.#defaultLine = lookUp;
      // A failed look-up is tried again by the next delivery.
      lookUp.catch(() => {
        this.#defaultLine = undefined;
      });
    }
    return this.#defaultLine;
  }

  /** The body of a delivery's first request, kept with its key before it is sent; or why there is none. */
  async #firstBody(drop: DropSubmission, to: string, callbackToken: string): Promise<string | SubmitResult> {
    let audio: { media_id: string } | { audio_url: string };
    let sender: { phone_line_id: string } | { caller_id: string };
    try {
      if (this.#config.audioUrl) audio = { audio_url: drop.audioUrl };
      else if (!EXTENSIONS[drop.audioType]) {
        return {
          ok: false,
          retryable: false,
          reason: `Drop Cowboy plays MP3 and WAV audio only; this drop's audio is ${drop.audioType.toUpperCase()}.`,
        };
      } else audio = { media_id: await this.#mediaIdFor(drop) };
      if (this.#config.byoc) sender = { caller_id: `+1${drop.callerId}` };
      else {
        const line = await this.#lineId();
        if (!line) {
          return {
            ok: false,
            retryable: false,
            reason:
              'Drop Cowboy has no phone line to send from: set DROPCOWBOY_PHONE_LINE_ID, or a default voice line on the account (reason 4010).',
          };
        }
        sender = { phone_line_id: line };
      }
    } catch (error) {
      // Refused (a key without media:write, a URL Drop Cowboy cannot fetch): trying again will not help.
      if (error instanceof CallError) return callFailure(error);
      return { ok: false, retryable: true, reason: `Drop Cowboy could not be reached: ${describeFetchError(error)}` };
    }
    const body = JSON.stringify({
      to,
      ...sender,
      ...audio,
      foreign_id: String(drop.deliveryId),
      callback_url: `${this.#publicUrl}/v3/callbacks/dropcowboy/callback/${callbackToken}`,
    });
    // Two processes trying the same delivery at once keep one body: the first stored.
    return freezeRequestBody(this.#db, drop.deliveryId, body);
  }

  async #send(drop: DropSubmission, body: string, idempotencyKey: string): Promise<SubmitResult> {
    let reply: Reply;
    try {
      reply = await this.#call('POST', '/rvm', body, SUBMIT_TIMEOUT_MS, { 'idempotency-key': idempotencyKey });
    } catch (error) {
      if (error instanceof CallError) return callFailure(error);
      return { ok: false, retryable: true, reason: `Drop Cowboy could not be reached: ${describeFetchError(error)}` };
    }
    if (reply.ok) {
      const messageId = reply.json?.message_id;
      const reference = typeof messageId === 'string' || typeof messageId === 'number' ? String(messageId) : undefined;
      await noteAccepted(this.#db, drop.deliveryId, reference);
      return { ok: true, reference };
    }
    const reason = `Drop Cowboy answered HTTP ${reply.status}${problemText(reply.json)}`;
    // The same key and body are sent again, so a retry after a 5xx, a 429 or a lost reply never drops twice.
    return {
      ok: false,
      retryable: retryableStatus(reply.status),
      reason,
      outcome: refusal(reply.status, reply.json),
      ...(reply.retryAfterMs !== undefined ? { retryAfterMs: reply.retryAfterMs } : {}),
    };
  }
}

/**
 * The account's pace, shared by every request of this process: after a 429 nothing is sent before
 * its `Retry-After` (seconds or an HTTP date; 2 s when absent) has passed, and requests are then
 * spaced — 100 ms after the first 429, doubling with each further one up to 2 s — the spacing
 * halving again with each request answered 2xx. Each process keeps its own pace.
 */
class AccountPace {
  #resumeAt = 0;
  #spacingMs = 0;
  #nextAt = 0;

  /** How long the next request would wait for its turn. */
  waitMs(): number {
    return Math.max(0, Math.max(this.#resumeAt, this.#nextAt) - realTimeMs());
  }

  /** Waits for this request's turn. */
  async turn(): Promise<void> {
    for (;;) {
      const now = realTimeMs();
      const at = Math.max(this.#resumeAt, this.#nextAt);
      if (at <= now) {
        this.#nextAt = now + this.#spacingMs;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, at - now));
    }
  }

  slowDown(retryAfterMs: number | undefined): void {
    this.#resumeAt = Math.max(this.#resumeAt, realTimeMs() + (retryAfterMs ?? DEFAULT_RETRY_AFTER_MS));
    this.#spacingMs = Math.min(MAX_SPACING_MS, this.#spacingMs === 0 ? 100 : this.#spacingMs * 2);
  }

  ease(): void {
    this.#spacingMs = this.#spacingMs <= 100 ? 0 : Math.floor(this.#spacingMs / 2);
  }
}

const DEFAULT_RETRY_AFTER_MS = 2_000;
/** The longest pause a request waits out in place; beyond it the delivery is deferred. */
const MAX_WAIT_MS = 30_000;
const MAX_SPACING_MS = 2_000;
/** The longest Retry-After honoured as given (a longer one is capped: the delivery is deferred that long). */
const MAX_RETRY_AFTER_MS = 3_600_000;

/** The default voice line of the account: a line typed `voice` (or untyped) flagged default; never an SMS line. */
function defaultVoiceLine(lines: Record<string, unknown>[]): Record<string, unknown> | undefined {
  const kind = (line: Record<string, unknown>) => {
    const type = line.type ?? line.line_type ?? line.product ?? line.channel;
    return typeof type === 'string' ? type.toLowerCase() : undefined;
  };
  const isDefault = (line: Record<string, unknown>) => line.is_default === true || line.default === true;
  const voice = lines.filter((line) => {
    const type = kind(line);
    return type === undefined || type === 'voice' || type === 'rvm';
  });
  return voice.find(isDefault);
}

/** A refused request's outcome: Drop Cowboy's code (its `details.code`, else `code`, else the HTTP status) and words. */
function refusal(status: number, json: Record<string, unknown> | undefined): SubmitOutcome {
  const details = isObject(json?.details) ? json.details : undefined;
  const code = [details?.code, json?.code].find((c) => typeof c === 'string' || typeof c === 'number');
  return {
    classification: status === 429 ? 'rate_limited' : status >= 500 ? 'provider_unavailable' : 'refused',
    permanent: false,
    code: code === undefined ? `HTTP ${status}` : String(code),
    description: problemText(json).replace(/^: /, '') || null,
  };
}

/** A Drop Cowboy call answered with an error status (or held back by the account's pace: 429). */
class CallError extends Error {
  readonly status: number;
  readonly retryAfterMs: number | undefined;
  constructor(status: number, message: string, retryAfterMs?: number) {
    super(message);
    this.status = status;
    this.retryAfterMs = retryAfterMs;
  }
}

function callFailure(error: CallError): SubmitResult {
  return {
    ok: false,
    retryable: retryableStatus(error.status),
    reason: error.message,
    ...(error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {}),
  };
}

/** Worth trying again (with the same Idempotency-Key): Drop Cowboy was down, busy or still working. */
function retryableStatus(status: number): boolean {
  return status >= 500 || [408, 409, 425, 429].includes(status);
}

/** `title`/`detail`/`code` (or `message`/`error`) of an error body and its `details.code`, for the delivery's last error. */
function problemText(json: Record<string, unknown> | undefined): string {
  if (!json) return '';
  const details = isObject(json.details) ? json.details : {};
  const parts = [json.title, json.detail, json.code, json.message, json.error, details.code, details.message]
    .filter((v): v is string | number => typeof v === 'string' || typeof v === 'number')
    .filter((v, i, all) => all.indexOf(v) === i);
  return parts.length > 0 ? `: ${parts.join(' — ').slice(0, 200)}` : '';
}

function listOf(json: Record<string, unknown> | undefined): Record<string, unknown>[] {
  const data = json?.data;
  const list = Array.isArray(data) ? data : isObject(data) ? (data.lines ?? data.items ?? data.data) : undefined;
  return Array.isArray(list) ? list.filter(isObject) : [];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}
