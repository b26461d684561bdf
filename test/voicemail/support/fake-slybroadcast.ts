import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getHttps, postHttps } from './voicemail-app.ts';

/**
 * A Slybroadcast gateway as PROVIDERS.md documents it: `POST /gateway/vmb.php`, form fields in,
 * plain text out (`OK` + `session_id=…`, or `ERROR` + reason), one session per submission. It
 * downloads the audio from `c_url` as Slybroadcast does, and posts dispositions (form field
 * `var`) to the submission's `c_dispo_url` when the test says so.
 */
export interface SlybroadcastDrop {
  fields: Record<string, string>;
  contentType: string;
  sessionId: string;
  audioBytes: number;
}

/** What the gateway does with the next submission for a number: by default, accepts it. */
export type Behaviour = { error: string } | { status: number } | 'hang up';

const REQUIRED = ['c_uid', 'c_password', 'c_phone', 'c_url', 'c_audio', 'c_callerID', 'c_date', 'c_dispo_url'];

export class FakeSlybroadcast {
  readonly drops: SlybroadcastDrop[] = [];
  /** Every submission received, accepted or not (phone numbers). */
  readonly attempts: string[] = [];
  readonly #behaviours = new Map<string, Behaviour[]>();
  /** Control calls received (`c_option` and its fields, credentials checked). */
  readonly controls: { option: string; fields: Record<string, string> }[] = [];
  /** What `callstatus` answers per number: a disposition status (`OK`, `FAILED|reason`), else still pending. */
  readonly callStatus = new Map<string, string>();
  /**
   * Numbers whose `callstatus` answers in the other form clients have seen: no `OK` line, the
   * session written `session_id=NNN` (`session_id=NNN|phone|status|…`).
   */
  readonly callStatusPrefixed = new Set<string>();
  /** Sessions whose `stop` fails with HTTP 500. */
  readonly failStop = new Set<string>();
  readonly #server: Server;
  #nextSession = 71_000;
  #sessionSpelling = 0;

  readonly account: { uid: string; password: string };
  #ca: string;

  constructor(account: { uid: string; password: string }, ca: string) {
    this.account = account;
    this.#ca = ca;
    this.#server = createServer((req, res) => {
      this.#handle(req).then(
        (reply) => {
          if (reply === 'hang up') return res.socket?.destroy();
          res.writeHead(reply.status, { 'content-type': 'text/plain' }).end(reply.body);
        },
        (error) => res.writeHead(500).end(String(error)),
      );
    });
  }

  /** The certificate Hopper serves, known once Hopper has started (it needs this gateway's URL first). */
  trust(ca: string): void {
    this.#ca = ca;
  }

  async listen(port = 0): Promise<void> {
    await new Promise<void>((resolve, reject) => this.#server.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/gateway/vmb.php`;
  }

  /** The next submissions for `phone` get these answers, in order. */
  behave(phone: string, ...behaviours: Behaviour[]): void {
    this.#behaviours.set(phone, [...(this.#behaviours.get(phone) ?? []), ...behaviours]);
  }

  dropTo(phone: string): SlybroadcastDrop {
    const drop = this.drops.find((d) => d.fields.c_phone === phone);
    if (!drop) throw new Error(`no drop to ${phone}`);
    return drop;
  }

  /** Posts a disposition body (`var` lines) to the callback URL Hopper gave with the drops. */
  async dispose(lines: string[], url = this.drops[0]?.fields.c_dispo_url) {
    if (!url) throw new Error('no drop gave a c_dispo_url');
    const body = new URLSearchParams({ var: lines.join('\n') }).toString();
    return postHttps(url, body, { 'content-type': 'application/x-www-form-urlencoded' }, this.#ca);
  }

  /** `session_id|phone|status|failure_reason|delivery_time|carrier` for one of the drops. */
  line(phone: string, status: string, reason = '', time = '2026-01-15 13:05:09'): string {
    return [this.dropTo(phone).sessionId, phone, status, reason, time, 'Verizon'].join('|');
  }

  /** Control options, on the same endpoint: `stop` (cancel a session), `callstatus` (one number's disposition). */
  control(fields: Record<string, string>): { status: number; body: string } {
    if (fields.c_uid !== this.account.uid || fields.c_password !== this.account.password) return error('Invalid user or password');
    const { c_uid: _uid, c_password: _password, c_option: option = '', ...rest } = fields;
    this.controls.push({ option, fields: rest });
    const session = this.drops.find((d) => d.sessionId === rest.session_id);
    if (!session) return error('session_id: not found');
    if (option === 'stop') {
      if (this.failStop.has(session.sessionId)) return { status: 500, body: 'Internal Server Error' };
      return { status: 200, body: 'OK\n' };
    }
    if (option === 'callstatus') {
      if (rest.c_phone !== session.fields.c_phone) return error('c_phone: not in this session');
      const phone = session.fields.c_phone ?? '';
      const status = this.callStatus.get(phone) ?? 'pending|';
      const line = `${session.sessionId}|${phone}|${status}|2026-01-15 13:05:09|Verizon`;
      return { status: 200, body: this.callStatusPrefixed.has(phone) ? `session_id=${line}\n` : `OK\n${line}\n` };
    }
    return error(`c_option: unknown option ${option}`);
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  async #handle(req: IncomingMessage): Promise<{ status: number; body: string } | 'hang up'> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (req.method !== 'POST' || req.url !== '/gateway/vmb.php') return { status: 404, body: 'Not Found' };
    const contentType = String(req.headers['content-type'] ?? '');
    const fields = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
    if (fields.c_option) return this.control(fields);
    this.attempts.push(fields.c_phone ?? '');
    const behaviour = this.#behaviours.get(fields.c_phone ?? '')?.shift();
    if (behaviour === 'hang up') return 'hang up';
    if (behaviour && 'status' in behaviour) return { status: behaviour.status, body: 'Service Unavailable' };

    const missing = REQUIRED.find((name) => !fields[name]);
    if (missing) return error(`${missing}: required`);
    if (fields.c_uid !== this.account.uid || fields.c_password !== this.account.password) return error('Invalid user or password');
    if (!/^\d{10}$/.test(fields.c_phone ?? '') || !/^\d{10}$/.test(fields.c_callerID ?? '')) return error('Bad phone number');
    if (!['wav', 'mp3', 'm4a'].includes(fields.c_audio ?? '')) return error('c_audio: must be wav, mp3 or m4a');
    if (behaviour) return error(behaviour.error);
    const audio = await getHttps(fields.c_url as string, this.#ca).catch(() => ({ status: 0, bytes: Buffer.alloc(0) }));
    if (audio.status !== 200 || audio.bytes.length === 0) return error("Bad Audio, can't download");

    const sessionId = String(this.#nextSession++);
    this.drops.push({ fields, contentType, sessionId, audioBytes: audio.bytes.length });
    // Both spellings clients have seen, alternately.
    const session = this.#sessionSpelling++ % 2 === 0 ? `session_id=${sessionId}` : `Session ID=${sessionId}`;
    return { status: 200, body: `OK\n${session}\nnumber of phone=1\n` };
  }
}

function error(reason: string) {
  // Slybroadcast reports refusals with HTTP 200.
  return { status: 200, body: `ERROR\n${reason}\n` };
}
