import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getHttps, postHttps } from './voicemail-app.ts';

/**
 * Drop Cowboy's API v2 as its own repository documents it (`Drop-Cowboy/dropcowboy`:
 * examples/api/CONTRACT.md, docs/concepts/idempotency.md, byoc-and-audio.md, send-results.md,
 * webhooks.md):
 *
 * - every route checks `x-key`/`x-secret`;
 * - `POST /rvm` answers `202 {"status":"queued","message_id":<uuid>}` before checking the drop; a
 *   drop that breaks the documented rules (an `Idempotency-Key` that is not a UUID: 3028; a key
 *   seen with another body: 3027; not exactly one audio field; `to` not E.164; no phone line:
 *   4010; `audio_url` not enabled: 3014) is recorded in `violations` and not queued. The same key
 *   with the same body answers the first message id again and drops nothing;
 * - `GET /phone/public/lines` (`data[]` with `is_default`), `POST /media/public/media` (import by
 *   URL: the audio is downloaded from Hopper's public URL, `data.media_id` answered);
 * - results: the per-send callback (unsigned, flat, `foreign_id` echoed) and signed webhooks
 *   (`X-Signature: sha256=HMAC(secret, X-Timestamp + "." + body)`, `X-Signature-Version: v1`,
 *   `X-Event-Id`), posted when the test says so, shaped as the repository's fixtures
 *   (examples/api/fixtures/*.json; drop-cowboy.test.ts checks the shapes against them): the
 *   callback and the status carry the same `drop_id`, the receipt another one (a 24-hex id where
 *   the status has a UUID), and none but the callback carries `foreign_id`; `contact_id` is the
 *   contact's, the same for every drop to a number.
 */
export interface DropCowboyRequest {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  body: string;
  status: number;
  /** When it arrived (wall clock, ms). */
  at: number;
}

export interface DropCowboyDrop {
  messageId: string;
  /** The `drop_id` of the callback and of the status webhook. */
  dropId: string;
  /** The `drop_id` of the receipt webhook: not the status's (webhook.rvm-receipt.json). */
  receiptDropId: string;
  idempotencyKey: string;
  body: Record<string, string>;
  /** The body's bytes as they came: a retry under the same key must send exactly these. */
  raw: string;
}

export interface DropCowboyOutcome {
  status: 'success' | 'failure';
  reason_code: number;
  reason?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const TEAM_ID = '3f6c2a1e-8b4d-4c7a-9e2f-5a1b3c4d6e7f';
const USER_ID = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
/** The number Drop Cowboy sent from (the callback's `caller_id`, the webhooks' `from`). */
const FROM = '+12125550100';
export const PHONE_LINE_ID = 'e2b6f9a3-5c1d-4e8b-a4f7-9c3e1b5d7a28';
/** The account's default SMS line, listed first: never the line of a ringless voicemail. */
export const SMS_LINE_ID = '7d3c1b2a-9e8f-4a6b-8c5d-2e1f0a9b8c7d';

export class FakeDropCowboy {
  readonly requests: DropCowboyRequest[] = [];
  /** Drops actually queued, one per idempotency key. */
  readonly drops: DropCowboyDrop[] = [];
  /** Requests that would fail at Drop Cowboy, with the documented reason code. */
  readonly violations: { code: number; why: string }[] = [];
  /** Media imports: the URL each one downloaded and its size. */
  readonly imports: { url: string; bytes: number; mediaId: string }[] = [];
  readonly #failures = new Map<string, number[]>();
  readonly #loseReply = new Set<string>();
  readonly #early = new Map<string, DropCowboyOutcome>();
  /** Drop Cowboy's contact id of each number: the same on every event about it. */
  readonly #contacts = new Map<string, string>();
  /** HTTP statuses the next media imports get (a key without media:write gets 403). */
  readonly refuseImports: number[] = [];
  /** A burst of 429s (with this Retry-After, seconds) for `ms` from the first `POST /rvm` it meets. */
  #rateLimited: { ms: number; until?: number; retryAfter: string | undefined } | undefined;
  /** The next `POST /rvm` for a number get these refusals (status and problem body). */
  readonly #refusals = new Map<string, { status: number; body: unknown }[]>();
  readonly #server: Server;
  readonly #credentials: { key: string; secret: string };
  readonly #webhookSecrets: string[];
  #ca: string;
  readonly #now: () => Date;
  /** What Hopper answered to each webhook and callback post. */
  readonly posts: { kind: 'webhook' | 'callback'; status: number; body: string }[] = [];

  /** A bring-your-own-carrier account with `audio_url` enabled by support (else a retail account). */
  readonly #byoc: boolean;

  constructor(options: { key: string; secret: string; webhookSecrets: string[]; ca: string; now: () => Date; byoc?: boolean }) {
    this.#byoc = options.byoc ?? false;
    this.#credentials = { key: options.key, secret: options.secret };
    this.#webhookSecrets = options.webhookSecrets;
    this.#ca = options.ca;
    this.#now = options.now;
    this.#server = createServer((req, res) => {
      this.#handle(req).then(
        (reply) =>
          reply === 'lost'
            ? res.socket?.destroy()
            : res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers }).end(JSON.stringify(reply.body)),
        (error) => res.writeHead(500).end(String(error)),
      );
    });
  }

  trust(ca: string): void {
    this.#ca = ca;
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', () => resolve()));
  }

  /** The API's base URL (DROPCOWBOY_URL). */
  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** The next `POST /rvm` for `to` (E.164) get these HTTP statuses before one is accepted. */
  failFirst(to: string, ...statuses: number[]): void {
    this.#failures.set(to, statuses);
  }

  /**
   * From the next `POST /rvm` on, for `ms`, every one gets 429 Too Many Requests, with
   * `Retry-After: <retryAfter>` when given. Answers when the burst began (wall clock, ms), once it has.
   */
  rateLimit(ms: number, retryAfter?: number | string): () => number | undefined {
    const burst: { ms: number; until?: number; retryAfter: string | undefined } = {
      ms,
      retryAfter: retryAfter === undefined ? undefined : String(retryAfter),
    };
    this.#rateLimited = burst;
    return () => (burst.until === undefined ? undefined : burst.until - ms);
  }

  /** The next `POST /rvm` for `to` is refused with this status and problem body (e.g. with `details.code`). */
  refuseNext(to: string, status: number, body: unknown): void {
    this.#refusals.set(to, [...(this.#refusals.get(to) ?? []), { status, body }]);
  }

  /** The next accepted drop to `to` is queued, but the connection drops before the answer. */
  loseReplyOnce(to: string): void {
    this.#loseReply.add(to);
  }

  dropsTo(to: string): DropCowboyDrop[] {
    return this.drops.filter((d) => d.body.to === to);
  }

  dropTo(to: string): DropCowboyDrop {
    const [drop, ...more] = this.dropsTo(to);
    if (!drop || more.length > 0) throw new Error(`${more.length + (drop ? 1 : 0)} drops to ${to}`);
    return drop;
  }

  /** The next accepted drop to `to` has its callback posted before Drop Cowboy answers the send. */
  callbackBeforeReply(to: string, outcome: DropCowboyOutcome): void {
    this.#early.set(to, outcome);
  }

  /** The per-send callback of a drop, as Drop Cowboy posts it (callback.rvm-success.json's shape). */
  callbackBody(drop: DropCowboyDrop, outcome: DropCowboyOutcome, foreignId?: string): Record<string, unknown> {
    return {
      drop_id: drop.dropId,
      team_id: TEAM_ID,
      session_id: randomUUID(),
      log_id: randomUUID(),
      contact_id: this.contactId(drop.body.to as string),
      phone_number: drop.body.to,
      caller_id: FROM,
      product_code: 'rvm',
      status: outcome.status,
      reason: outcome.reason ?? '',
      reason_code: outcome.reason_code,
      quantity: 1,
      product_cost: 0.04,
      compliance_fee: 0,
      tts_fee: 0,
      dnc: false,
      attempt_date: this.#now().toISOString(),
      foreign_id: foreignId ?? drop.body.foreign_id,
      proof_of_delivery_url: `https://api-v2.dropcowboy.com/campaign/public/receipts/cb-${drop.dropId}`,
    };
  }

  async callback(drop: DropCowboyDrop, outcome: DropCowboyOutcome, overrides: { url?: string; foreignId?: string } = {}) {
    const body = JSON.stringify(this.callbackBody(drop, outcome, overrides.foreignId));
    const reply = await postHttps(
      overrides.url ?? (drop.body.callback_url as string),
      body,
      { 'content-type': 'application/json' },
      this.#ca,
    );
    this.posts.push({ kind: 'callback', status: reply.status, body: reply.body });
    return { ...reply, json: parse(reply.body) };
  }

  /** Drop Cowboy's contact id for a number (E.164). */
  contactId(to: string): string {
    let id = this.#contacts.get(to);
    if (!id) {
      id = randomUUID();
      this.#contacts.set(to, id);
    }
    return id;
  }

  /**
   * The body of a signed webhook event about a drop: `contact.rvm.status` as webhook.rvm-status.json,
   * `contact.rvm.receipt` as webhook.rvm-receipt.json (with the receipt's own `drop_id`).
   */
  webhookBody(
    drop: DropCowboyDrop,
    event: 'contact.rvm.status' | 'contact.rvm.receipt',
    outcome: DropCowboyOutcome,
    eventId: string,
  ): Record<string, unknown> {
    const to = drop.body.to as string;
    const contactId = this.contactId(to);
    const result = { status: outcome.status, reason: outcome.reason ?? '', reason_code: outcome.reason_code, to, from: FROM };
    const head = { event_id: eventId, event, event_at: this.#now().getTime() };
    if (event === 'contact.rvm.status') {
      return {
        ...head,
        data: { team_id: TEAM_ID, contact_id: contactId, drop_id: drop.dropId, campaign_id: null, campaign_type: 'rvm', ...result },
      };
    }
    return {
      ...head,
      data: {
        team_id: TEAM_ID,
        team: { team_id: TEAM_ID, name: 'Example Realty' },
        user_id: USER_ID,
        user: {
          user_id: USER_ID,
          username: 'alex.morgan@example.com',
          first_name: 'Alex',
          last_name: 'Morgan',
          email: 'alex.morgan@example.com',
        },
        contact_id: contactId,
        contact: {
          contact_id: contactId,
          uid: null,
          main_phone: to,
          first_name: 'Jordan',
          last_name: 'Rivera',
          mobile_phone: to,
          tags: [],
          list_ids: [],
        },
        drop_id: drop.receiptDropId,
        campaign_session: {
          team_id: TEAM_ID,
          user_id: USER_ID,
          campaign_id: null,
          contact_id: contactId,
          list_id: null,
          phone_number: to,
          caller_id: FROM,
          product_code: 'rvm',
          dispo: {
            status: outcome.status,
            reason: outcome.reason ?? '',
            delivered_at: outcome.reason_code === 0 ? this.#now().toISOString() : null,
            dnc: false,
          },
        },
        campaign_id: null,
        list_id: null,
        list: null,
        campaign_type: 'rvm',
        ...result,
        proof_of_delivery_url: `https://api-v2.dropcowboy.com/campaign/public/receipts/rc-${drop.dropId}`,
        receipt_ready_at: this.#now().toISOString(),
      },
    };
  }

  /** A signed webhook event about a drop (webhook.rvm-status.json's / webhook.rvm-receipt.json's shape). */
  async webhook(
    hopperUrl: string,
    drop: DropCowboyDrop,
    event: 'contact.rvm.status' | 'contact.rvm.receipt',
    outcome: DropCowboyOutcome,
    overrides: { eventId?: string; timestamp?: number; secret?: string; signature?: string; version?: string; raw?: string } = {},
  ) {
    const eventId = overrides.eventId ?? randomUUID();
    const body = overrides.raw ?? JSON.stringify(this.webhookBody(drop, event, outcome, eventId));
    const timestamp = String(overrides.timestamp ?? Math.floor(this.#now().getTime() / 1000));
    const secret = overrides.secret ?? this.#webhookSecrets[this.#webhookSecrets.length - 1] ?? '';
    const signature = overrides.signature ?? `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
    const reply = await postHttps(
      `${hopperUrl}/v3/webhooks/dropcowboy`,
      body,
      {
        'content-type': 'application/json',
        'x-timestamp': timestamp,
        'x-signature': signature,
        'x-signature-version': overrides.version ?? 'v1',
        'x-event-id': eventId,
        'x-attempt': '1',
      },
      this.#ca,
    );
    this.posts.push({ kind: 'webhook', status: reply.status, body: reply.body });
    return { ...reply, json: parse(reply.body) };
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  async #handle(req: IncomingMessage): Promise<{ status: number; body: unknown; headers?: Record<string, string> } | 'lost'> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
    const path = (req.url ?? '').split('?')[0] ?? '';
    const at = Date.now();
    const answer = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      this.requests.push({ method: req.method ?? '', path, idempotencyKey, body: raw, status, at });
      return { status, body, headers };
    };
    if (req.headers['x-key'] !== this.#credentials.key || req.headers['x-secret'] !== this.#credentials.secret) {
      return answer(401, { title: 'Unauthorized', code: 'invalid_credentials' });
    }
    if (req.method === 'GET' && path === '/phone/public/lines') {
      return answer(200, {
        // Each product has its default line (lookups.js takes the default voice line).
        data: [
          { ivr_id: SMS_LINE_ID, name: 'Texts', type: 'sms', is_default: true },
          { ivr_id: '0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f', name: 'Other', type: 'voice', is_default: false },
          { ivr_id: PHONE_LINE_ID, name: 'Main', type: 'voice', is_default: true },
        ],
        meta: { request_id: randomUUID() },
      });
    }
    if (req.method === 'POST' && path === '/media/public/media') {
      const refusal = this.refuseImports.shift();
      if (refusal) return answer(refusal, { title: 'Forbidden', detail: 'this key lacks media:write', code: 'insufficient_scope' });
      const body = JSON.parse(raw) as Record<string, string>;
      if (body.type !== 'rvm' || !['.mp3', '.wav'].includes(body.ext ?? '') || !body.url || !body.name) {
        return answer(400, { title: 'Bad Request', detail: 'name, type rvm, url and ext .mp3|.wav are required' });
      }
      const audio = await getHttps(body.url, this.#ca).catch(() => ({ status: 0, bytes: Buffer.alloc(0) }));
      if (audio.status !== 200 || audio.bytes.length === 0)
        return answer(422, { title: 'Unprocessable', detail: 'could not download url' });
      const mediaId = randomUUID();
      this.imports.push({ url: body.url, bytes: audio.bytes.length, mediaId });
      return answer(201, { data: { media_id: mediaId, name: body.name }, meta: { request_id: randomUUID() } });
    }
    if (req.method !== 'POST' || path !== '/rvm') return answer(404, { title: 'Not Found' });
    if (!String(req.headers['content-type']).startsWith('application/json')) return answer(415, { title: 'JSON only' });
    const body = JSON.parse(raw) as Record<string, string>;

    const limited = this.#rateLimited;
    if (limited) limited.until ??= at + limited.ms;
    if (limited?.until !== undefined && at < limited.until) {
      return answer(
        429,
        { title: 'Too Many Requests', details: { code: 'rate_limited' } },
        limited.retryAfter ? { 'retry-after': limited.retryAfter } : {},
      );
    }
    const failure = this.#failures.get(body.to as string)?.shift();
    if (failure) return answer(failure, { title: 'Service Unavailable' });
    const refusal = this.#refusals.get(body.to as string)?.shift();
    if (refusal) return answer(refusal.status, refusal.body);

    const messageId = randomUUID();
    const refuse = (code: number, why: string) => {
      this.violations.push({ code, why });
      // Drop Cowboy answers 202 first and fails the send later.
      return answer(202, { status: 'queued', message_id: messageId });
    };
    if (!idempotencyKey || !UUID.test(idempotencyKey)) return refuse(3028, `Idempotency-Key ${idempotencyKey} is not a UUID`);
    const known = this.drops.find((d) => d.idempotencyKey === idempotencyKey);
    if (known) {
      // The key's first body, byte for byte (idempotency.md: the request is fingerprinted).
      if (known.raw !== raw) return refuse(3027, 'same key, another body');
      return answer(202, { status: 'queued', message_id: known.messageId });
    }
    if (!/^\+1\d{10}$/.test(body.to ?? '')) return refuse(3000, `to ${body.to} is not E.164`);
    const audio = ['media_id', 'audio_url', 'tts_body'].filter((k) => body[k] !== undefined);
    if (audio.length !== 1) return refuse(3001, `audio fields: ${audio.join(', ') || 'none'}`);
    if (this.#byoc) {
      if (!/^\+1\d{10}$/.test(body.caller_id ?? '') || body.phone_line_id !== undefined) return refuse(3000, 'BYOC: caller_id only');
      if (body.audio_url !== undefined) {
        const audio = await getHttps(body.audio_url, this.#ca).catch(() => ({ status: 0, bytes: Buffer.alloc(0) }));
        if (audio.status !== 200 || audio.bytes.length === 0) return refuse(3001, `audio_url ${body.audio_url} could not be downloaded`);
      }
    } else {
      if (body.audio_url !== undefined) return refuse(3014, 'audio_url is not enabled on this account');
      if (body.caller_id !== undefined) return refuse(3000, 'caller_id on a retail account');
      if (body.phone_line_id !== PHONE_LINE_ID) return refuse(4010, `phone_line_id ${body.phone_line_id}`);
    }
    if (body.media_id !== undefined && !this.imports.some((m) => m.mediaId === body.media_id)) {
      return refuse(3001, `media_id ${body.media_id} is not on the account`);
    }

    const drop = { messageId, dropId: randomUUID(), receiptDropId: randomBytes(12).toString('hex'), idempotencyKey, body, raw };
    this.drops.push(drop);
    const early = this.#early.get(body.to as string);
    if (early) {
      this.#early.delete(body.to as string);
      await this.callback(drop, early);
    }
    if (this.#loseReply.delete(body.to as string)) {
      this.requests.push({ method: 'POST', path, idempotencyKey, body: raw, status: 0, at });
      return 'lost';
    }
    return answer(202, { status: 'queued', message_id: messageId });
  }
}

function parse(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
