import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { loadConfig } from '../../../src/config.ts';
import { loadTls } from '../../../src/tls.ts';
import { upload, wavFile } from '../../media/fixtures.ts';
import { waitFor } from '../../sending/support/wait.ts';
import { asKey } from '../../support/client.ts';
import { type Actor, createUser } from '../../support/factories.ts';
import { freePort } from '../../support/free-port.ts';
import { startTestApp, type TestApp } from '../../support/test-app.ts';

/**
 * A Hopper listening on real HTTPS at 127.0.0.1 (PUBLIC_URL points there, so providers' fakes
 * download the audio and post their callbacks to it), with workers and a settable clock.
 *
 * Time: the clock is set ahead of the wall clock (to a chosen local time somewhere). The engine
 * asks the job queue for work at times by that clock, and the queue runs jobs by the database's
 * clock; so while the app runs, the sending engine's jobs that are due by the test clock are made
 * due in the queue too (`followClock`) — what waiting would do, minus the wait.
 */
export interface VoicemailApp {
  t: TestApp;
  publicUrl: string;
  /** The server's certificate: what the fakes trust when they call Hopper. */
  ca: string;
  clock: TestClock;
  owner: Actor;
  close(): Promise<void>;
}

export class TestClock {
  #offsetMs = 0;
  readonly now = (): Date => new Date(Date.now() + this.#offsetMs);
  /** Sets the clock to `at`; time then runs on from there. It must not go back behind the wall clock. */
  set(at: Date): void {
    assert.ok(at.getTime() >= Date.now(), 'the test clock runs ahead of the wall clock');
    this.#offsetMs = at.getTime() - Date.now();
  }
}

/** The next instant, at least a minute from now, at which the UTC time is `hour`:00. */
export function nextUtcHour(hour: number): Date {
  const at = new Date(Date.now() + 60_000);
  const next = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate(), hour));
  return next.getTime() > at.getTime() ? next : new Date(next.getTime() + 86_400_000);
}

/** 19:00 UTC: inside calling hours in every US zone, summer and winter (Hawaii 09:00, Florida 14:00/15:00). */
export const daytime = () => nextUtcHour(19);

export async function startVoicemailApp(env: Record<string, string> = {}, logStream?: NodeJS.WritableStream): Promise<VoicemailApp> {
  const tlsDir = await mkdtemp(join(tmpdir(), 'hopper-tls-'));
  const tls = await loadTls(loadConfig({ DATA_DIR: tlsDir }));
  const port = await freePort();
  const publicUrl = `https://127.0.0.1:${port}`;
  const clock = new TestClock();
  clock.set(daytime());
  const t = await startTestApp({
    workers: true,
    clock: clock.now,
    logStream,
    https: { key: tls.key, cert: tls.cert },
    env: { PUBLIC_URL: publicUrl, SEND_RETRY_BASE: '200ms', SANDBOX_DELAY: '200ms', ...env },
  });
  await t.app.listen({ host: '127.0.0.1', port });
  const stopFollowing = followClock(t, clock);
  const owner = await createUser(t, 'User');
  return {
    t,
    publicUrl,
    ca: tls.cert,
    clock,
    owner,
    async close() {
      await stopFollowing();
      await t.close();
      await rm(tlsDir, { recursive: true, force: true });
    },
  };
}

/** The pg-boss schema of a test app (see sending/queue.ts). */
function bossSchema(t: TestApp): string {
  return `${t.config.databaseSchema === 'public' ? '' : `${t.config.databaseSchema}_`}pgboss`;
}

/** Until the returned function is called, makes the sending engine's jobs due by `clock` due in the queue. */
function followClock(t: TestApp, clock: TestClock): () => Promise<void> {
  let running = true;
  const loop = (async () => {
    while (running) {
      await sql`
        UPDATE ${sql.id(bossSchema(t), 'job')} SET start_after = now()
        WHERE name IN ('message-due', 'message-deliver') AND state IN ('created', 'retry')
          AND start_after > now() AND start_after <= ${clock.now()}`.execute(t.database.db);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  // A failure surfaces when the app closes, not as an unhandled rejection in between.
  const ended = loop.then(
    () => undefined,
    (error: unknown) => error,
  );
  return async () => {
    running = false;
    const error = await ended;
    if (error) throw error;
  };
}

/** When the engine asked to come back to a message (pending delivery jobs' start times). */
export async function scheduledDeliveryJobs(t: TestApp, dropId: number): Promise<Date[]> {
  const { rows } = await sql<{ start_after: Date }>`
    SELECT start_after FROM ${sql.id(bossSchema(t), 'job')}
    WHERE name = 'message-deliver' AND state = 'created' AND data->>'kind' = 'voicemail_drop' AND (data->>'id')::bigint = ${dropId}
    ORDER BY start_after`.execute(t.database.db);
  return rows.map((r) => new Date(r.start_after));
}

/** An audio item of the owner long enough for providers (6 s). */
export async function dropAudio(app: VoicemailApp): Promise<{ id: number; full_url: string }> {
  return upload(app.t.app, app.t.adminKey, app.owner.id, 'listing.wav', wavFile(6));
}

export interface Recipient {
  phone: string;
  first_name?: string;
  time_zone?: string | null;
}

/**
 * Creates the contacts under one new tag and a drop to that tag, scheduled to go now, and makes
 * its due job run. Returns the drop as created.
 */
export async function sendDrop(app: VoicemailApp, provider: string, recipients: Recipient[], fields: Record<string, unknown> = {}) {
  const api = asKey(app.t.app, app.owner.key);
  const tag = `drop-${Math.random().toString(36).slice(2, 10)}`;
  for (const [i, recipient] of recipients.entries()) {
    const made = await api.post(`/v3/users/${app.owner.id}/contacts`, { first_name: `Contact ${i}`, tags: [tag], ...recipient });
    assert.equal(made.status, 201, made.raw);
  }
  const tags = await api.get(`/v3/users/${app.owner.id}/tags?name=${tag}`);
  const tagId = tags.body.data[0].id;
  const media = await dropAudio(app);
  const drop = await api.post(`/v3/users/${app.owner.id}/voicemail_drops`, {
    provider,
    media_id: media.id,
    callback_number: '(727) 232-9117',
    name: 'New listing',
    recipients: [{ group: 'Tags', value: tagId }],
    status: 'Scheduled',
    send_type: 'Now',
    ...fields,
  });
  assert.equal(drop.status, 201, drop.raw);
  return { ...drop.body, media } as { id: number; media: { id: number; full_url: string } };
}

export async function readDrop(app: VoicemailApp, id: number) {
  const reply = await asKey(app.t.app, app.owner.key).get(`/v3/voicemail_drops/${id}`);
  assert.equal(reply.status, 200, reply.raw);
  return reply.body;
}

/** Polls the drop until `done` holds, failing with the last state seen. */
export async function waitForDrop(app: VoicemailApp, id: number, what: string, done: (drop: any) => boolean) {
  let last: unknown;
  try {
    return await waitFor(what, async () => {
      const drop = await readDrop(app, id);
      last = { status: drop.status, reason: drop.reason, reporting: drop.reporting };
      return done(drop) ? drop : undefined;
    });
  } catch (error) {
    throw new Error(
      `${(error as Error).message}; last seen ${JSON.stringify(last)}; deliveries ${JSON.stringify(await deliveriesOf(app.t, id))}`,
    );
  }
}

export interface DeliveryRow {
  id: number;
  address: string;
  state: string;
  provider_message_id: string | null;
  attempts: number;
  last_error: string | null;
  next_attempt_at: Date;
  sent_at: Date | null;
}

export async function deliveriesOf(t: TestApp, dropId: number): Promise<DeliveryRow[]> {
  const rows = await t.database.db
    .selectFrom('deliveries')
    .select(['id', 'address', 'state', 'provider_message_id', 'attempts', 'last_error', 'next_attempt_at', 'sent_at'])
    .where('message_kind', '=', 'voicemail_drop')
    .where('message_id', '=', dropId)
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}

export async function deliveryTo(t: TestApp, dropId: number, phone: string): Promise<DeliveryRow> {
  const found = (await deliveriesOf(t, dropId)).find((d) => d.address === phone);
  assert.ok(found, `no delivery to ${phone}`);
  return found;
}

/** A POST to Hopper over HTTPS, as a provider's server makes it. */
export function postHttps(
  url: string,
  body: string | Buffer,
  headers: Record<string, string>,
  ca: string,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', ca, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A GET over HTTPS (what a provider does with the audio URL). */
export function getHttps(url: string, ca: string): Promise<{ status: number; bytes: Buffer }> {
  return new Promise((resolve, reject) => {
    request(url, { ca }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes: Buffer.concat(chunks) }));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

export { waitFor };
