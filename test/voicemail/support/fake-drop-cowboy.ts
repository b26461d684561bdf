import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { postHttps } from './voicemail-app.ts';

/**
 * Drop Cowboy's v2 API as PROVIDERS.md documents it: `POST /rvm` with `x-key`/`x-secret` and an
 * `Idempotency-Key` (the same key and body never drop twice: the first answer is given again),
 * JSON in, `202 {"status":"queued","message_id":…}` out; outcomes posted to the drop's
 * `callback_url`, signed `X-Signature: sha256=HMAC(secret, timestamp + "." + body)`.
 */
export interface DropCowboyRequest {
  idempotencyKey: string | undefined;
  body: string;
  status: number;
}

export interface DropCowboyDrop {
  messageId: string;
  idempotencyKey: string;
  body: Record<string, string>;
}

export class FakeDropCowboy {
  readonly requests: DropCowboyRequest[] = [];
  /** Drops actually queued, one per idempotency key. */
  readonly drops: DropCowboyDrop[] = [];
  readonly #failures = new Map<string, number[]>();
  readonly #loseReply = new Set<string>();
  readonly #server: Server;
  readonly #credentials: { key: string; secret: string };
  readonly #webhookSecret: string;
  #ca: string;
  readonly #now: () => Date;
  #nextMessage = 1;
  #nextEvent = 1;

  constructor(options: { key: string; secret: string; webhookSecret: string; ca: string; now: () => Date }) {
    this.#credentials = { key: options.key, secret: options.secret };
    this.#webhookSecret = options.webhookSecret;
    this.#ca = options.ca;
    this.#now = options.now;
    this.#server = createServer((req, res) => {
      this.#handle(req).then(
        (reply) =>
          reply === 'lost'
            ? res.socket?.destroy()
            : res.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body)),
        (error) => res.writeHead(500).end(String(error)),
      );
    });
  }

  /** The certificate Hopper serves, known once Hopper has started (it needs this server's URL first). */
  trust(ca: string): void {
    this.#ca = ca;
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', () => resolve()));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/rvm`;
  }

  /** The next requests for `to` (E.164) get these HTTP statuses before one is accepted. */
  failFirst(to: string, ...statuses: number[]): void {
    this.#failures.set(to, statuses);
  }

  /** The next accepted drop to `to` is queued, but the connection drops before the answer. */
  loseReplyOnce(to: string): void {
    this.#loseReply.add(to);
  }

  dropTo(to: string): DropCowboyDrop {
    const drop = this.drops.find((d) => d.body.to === to);
    if (!drop) throw new Error(`no drop to ${to}`);
    return drop;
  }

  /** A signed outcome post for one drop, as Drop Cowboy sends it (overrides make it wrong). */
  async report(
    drop: DropCowboyDrop,
    outcome: { status: 'success' | 'failure'; reason_code: number },
    overrides: { eventId?: string; timestamp?: number; secret?: string; signature?: string } = {},
  ) {
    const body = JSON.stringify({
      event_id: overrides.eventId ?? `evt_${this.#nextEvent++}`,
      message_id: drop.messageId,
      foreign_id: drop.body.foreign_id,
      to: drop.body.to,
      ...outcome,
    });
    const timestamp = String(overrides.timestamp ?? Math.floor(this.#now().getTime() / 1000));
    const signature =
      overrides.signature ??
      `sha256=${createHmac('sha256', overrides.secret ?? this.#webhookSecret)
        .update(`${timestamp}.${body}`)
        .digest('hex')}`;
    const url = drop.body.callback_url as string;
    const reply = await postHttps(
      url,
      body,
      { 'content-type': 'application/json', 'x-timestamp': timestamp, 'x-signature': signature },
      this.#ca,
    );
    return { ...reply, json: reply.body ? JSON.parse(reply.body) : undefined };
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  async #handle(req: IncomingMessage): Promise<{ status: number; body: unknown } | 'lost'> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
    const answer = (status: number, body: unknown) => {
      this.requests.push({ idempotencyKey, body: raw, status });
      return { status, body };
    };
    if (req.method !== 'POST' || req.url !== '/rvm') return answer(404, { error: 'not found' });
    if (req.headers['x-key'] !== this.#credentials.key || req.headers['x-secret'] !== this.#credentials.secret) {
      return answer(401, { error: 'invalid credentials' });
    }
    if (!String(req.headers['content-type']).startsWith('application/json')) return answer(415, { error: 'JSON only' });
    const body = JSON.parse(raw) as Record<string, string>;
    const sources = ['media_id', 'audio_url', 'tts'].filter((k) => body[k] !== undefined);
    if (!/^\+1\d{10}$/.test(body.to ?? '') || sources.length !== 1)
      return answer(400, { error: 'to and exactly one audio source are required' });

    const failures = this.#failures.get(body.to as string);
    const failure = failures?.shift();
    if (failure) return answer(failure, { error: 'temporarily unavailable' });

    const known = this.drops.find((d) => d.idempotencyKey === idempotencyKey);
    if (known && idempotencyKey) {
      // Same key: the first answer again, and nothing is dropped twice.
      return answer(202, { status: 'queued', message_id: known.messageId });
    }
    const drop = { messageId: `dc_${this.#nextMessage++}`, idempotencyKey: idempotencyKey ?? '', body };
    this.drops.push(drop);
    if (this.#loseReply.delete(body.to as string)) {
      this.requests.push({ idempotencyKey, body: raw, status: 0 });
      return 'lost';
    }
    return answer(202, { status: 'queued', message_id: drop.messageId });
  }
}
