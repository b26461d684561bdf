import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { generateApiKey } from '../../src/api-key-format.ts';
import { loadConfig } from '../../src/config.ts';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import { openJobQueue } from '../../src/db/job-queue.ts';
import { bootstrapAdministrator } from '../../src/identity/bootstrap.ts';
import { seededDataDir } from '../support/pglite-template.ts';
import { testConfigEnv, usingPostgres } from '../support/test-app.ts';
import { scheduleNow, seedBulkSend } from './support/bulk-send.ts';
import { freePort, type HopperProcess, startHopper, stopHopper, untilSentThroughApi } from './support/hopper-process.ts';
import { TEST_POSTAL_ADDRESS } from './support/sending-app.ts';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.ts';
import { waitFor } from './support/wait.ts';

/**
 * Crash safety (docs/sending.md, "Crash safety and the duplicate window"), with real processes: a worker (`node src/main.ts`) is killed with
 * SIGKILL in the middle of a 2,000-recipient send, a new one finishes it. Every contact ends with
 * exactly one delivery, every delivery is recorded sent once, and the SMTP server saw each
 * Message-ID once — except inside the window docs/sending.md describes: a delivery the dead worker
 * had claimed (state `sending` when it died) may have been accepted by the SMTP server without
 * being recorded yet; the new worker takes the claim over when its lease runs out and sends it
 * again, with the same Message-ID. The test checks exactly that: every duplicate is one of the
 * claims the dead worker held, each went out at most twice, and — a process holding two hand-over
 * slots per SMTP connection, each until its outcome is recorded — with one SMTP connection at most
 * two emails go out twice per crash.
 */
const RECIPIENTS = 2000;
const DUPLICATE_WINDOW = 2 * 10;
/** The hand-over slots of WORKER_ENV (2 × SMTP_MAX_CONNECTIONS): the most a crash may send twice. */
const MOST_DUPLICATES = 2;
// The killed worker's delivery job is retried once the job queue sees its heartbeat silent:
// checked every 5 s here rather than every minute (JOB_SUPERVISE_INTERVAL).
const WORKER_ENV = {
  JOB_SUPERVISE_INTERVAL: '5s',
  SMTP_MAX_CONNECTIONS: '1',
  SEND_BATCH_SIZE: '10',
  SEND_LEASE: '2s',
  SEND_RETRY_BASE: '200ms',
  LOG_LEVEL: 'info',
};

interface Setup {
  database: DatabaseHandle;
  env: Record<string, string>;
  userId: number;
  messageId: number;
  schedule(): Promise<void>;
  /** Stops the job queue of the test process (the workers are separate processes). */
  release(): Promise<void>;
}

/** A fresh database (the env's), an Administrator, RECIPIENTS contacts and a draft to them. */
async function setUp(env: Record<string, string>, recipients = RECIPIENTS): Promise<Setup> {
  const config = loadConfig(env);
  const database = await openDatabase(config);
  const queue = await openJobQueue(database, config);
  const bootstrap = await bootstrapAdministrator(database.db, config);
  assert.ok(bootstrap.kind !== 'none');
  const { messageId } = await seedBulkSend(database.db, bootstrap.userId, recipients);
  return {
    database,
    env,
    userId: bootstrap.userId,
    messageId,
    schedule: () => scheduleNow(database.db, queue, messageId),
    release: () => queue.stop(),
  };
}

async function dropSchemas(database: DatabaseHandle, schema: string): Promise<void> {
  await sql`DROP SCHEMA IF EXISTS ${sql.id(schema)} CASCADE`.execute(database.db);
  await sql`DROP SCHEMA IF EXISTS ${sql.id(`${schema}_pgboss`)} CASCADE`.execute(database.db);
}

const ours = (sink: SmtpSink, messageId: number) => sink.messages.filter((m) => m.messageId.startsWith(`<templated_email-${messageId}.`));

/** Polls the message's status in the database until it is Sent (a minute at most). */
async function untilSent(database: DatabaseHandle, messageId: number): Promise<void> {
  await waitFor(
    'the message to be Sent',
    async () => {
      const row = await database.db.selectFrom('templated_emails').select('status').where('id', '=', messageId).executeTakeFirst();
      return row?.status === 'Sent';
    },
    { timeoutMs: 60_000 },
  );
}

/** The deliveries a dead worker held: claimed (`sending`), outcome not recorded. */
async function claimsHeld(database: DatabaseHandle, messageId: number): Promise<Set<number>> {
  const rows = await database.db
    .selectFrom('deliveries')
    .select('id')
    .where('message_id', '=', messageId)
    .where('state', '=', 'sending')
    .execute();
  return new Set(rows.map((r) => r.id));
}

/**
 * The end state every crash test demands, read from the ledger and the SMTP server: one delivery
 * per contact, all sent and counted, every Message-ID received, and any Message-ID received twice
 * one of `heldAtDeath` — the dead worker's claims.
 */
async function assertSentOnce(database: DatabaseHandle, sink: SmtpSink, messageId: number, recipients: number, heldAtDeath: Set<number>) {
  const message = await database.db.selectFrom('templated_emails').selectAll().where('id', '=', messageId).executeTakeFirstOrThrow();
  assert.equal(message.status, 'Sent');
  const deliveries = await database.db.selectFrom('deliveries').selectAll().where('message_id', '=', messageId).execute();
  assert.equal(deliveries.length, recipients, 'one delivery per contact');
  assert.equal(new Set(deliveries.map((d) => d.contact_id)).size, recipients);
  assert.ok(
    deliveries.every((d) => d.state === 'sent'),
    'every delivery sent',
  );
  const counted = await sql<{ sent: string; failed: string }>`
    SELECT coalesce(sum(sent), 0) AS sent, coalesce(sum(failed), 0) AS failed FROM message_counters WHERE message_id = ${messageId}`.execute(
    database.db,
  );
  assert.equal(Number(counted.rows[0]!.sent) + Number(counted.rows[0]!.failed), recipients, 'sent + failed = deliveries');

  const received = new Map<string, number>();
  for (const m of ours(sink, messageId)) received.set(m.messageId, (received.get(m.messageId) ?? 0) + 1);
  assert.deepEqual(new Set(received.keys()), new Set(deliveries.map((d) => d.provider_message_id)), 'the SMTP server got every delivery');
  const deliveryOf = new Map(deliveries.map((d) => [d.provider_message_id, d]));
  const duplicated = [...received].filter(([, n]) => n > 1).map(([id, n]) => ({ delivery: deliveryOf.get(id)!, n }));
  for (const { delivery, n } of duplicated) {
    assert.equal(n, 2, 'never more than one extra copy');
    assert.ok(heldAtDeath.has(delivery.id), `delivery ${delivery.id} went out twice without being held by the dead worker`);
    assert.equal(delivery.attempts, 2, 'claimed by the dead worker, then by the new one');
  }
  assert.ok(heldAtDeath.size <= DUPLICATE_WINDOW, `the dead worker held ${heldAtDeath.size} claims (at most ${DUPLICATE_WINDOW})`);
  assert.ok(duplicated.length <= MOST_DUPLICATES, `${duplicated.length} emails went out twice (at most ${MOST_DUPLICATES})`);
  return { duplicated: duplicated.length };
}

describe('crash safety: a worker killed mid-send', () => {
  test('PostgreSQL (ROLE=worker): SIGKILL part-way, a new worker finishes; each contact emailed once, bar the window', async (t) => {
    if (!usingPostgres) return t.skip('needs PostgreSQL: set DATABASE_URL (CI runs the suite on both databases)');
    const dataDir = await mkdtemp(join(tmpdir(), 'hopper-crash-'));
    const sink = await startSmtpSink();
    const setup = await setUp(testConfigEnv(dataDir, { SMTP_URL: sink.url, MAIL_POSTAL_ADDRESS: TEST_POSTAL_ADDRESS }));
    const workerEnv = { ...setup.env, ROLE: 'worker', DATABASE_URL: process.env.DATABASE_URL!, ...WORKER_ENV };
    const workers: HopperProcess[] = [];
    try {
      workers.push(startHopper(workerEnv));
      await workers[0]!.ready();
      await setup.schedule();
      await waitFor('a third of the emails to go out', () => ours(sink, setup.messageId).length >= RECIPIENTS / 3);
      await stopHopper(workers[0]!, 'SIGKILL');
      assert.ok(ours(sink, setup.messageId).length < RECIPIENTS, 'killed before the end');
      const held = await claimsHeld(setup.database, setup.messageId);

      workers.push(startHopper(workerEnv));
      await workers[1]!.ready();
      await untilSent(setup.database, setup.messageId);
      const { duplicated } = await assertSentOnce(setup.database, sink, setup.messageId, RECIPIENTS, held);
      t.diagnostic(`claims the dead worker held: ${held.size}; sent twice: ${duplicated}`);
    } finally {
      await Promise.all(workers.map((w) => stopHopper(w)));
      await setup.release();
      await dropSchemas(setup.database, setup.env.DATABASE_SCHEMA!);
      await setup.database.close();
      await sink.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  test('PGlite (ROLE=all): SIGKILL part-way, started again on the same DATA_DIR, it finishes; each contact emailed once, bar the window', async (t) => {
    if (usingPostgres) return t.skip('PGlite only: runs in the suite pass without DATABASE_URL');
    const dataDir = await seededDataDir('hopper-crash-');
    const sink = await startSmtpSink();
    const port = await freePort();
    const adminKey = generateApiKey();
    const env = {
      DATA_DIR: dataDir,
      PUBLIC_URL: 'https://hopper.test',
      PORT: String(port),
      HOST: '127.0.0.1',
      TRUST_PROXY: 'true',
      BOOTSTRAP_ADMIN_KEY: adminKey,
      SMTP_URL: sink.url,
      MAIL_FROM: 'Hopper <no-reply@hopper.test>',
      MAIL_POSTAL_ADDRESS: TEST_POSTAL_ADDRESS,
      ...WORKER_ENV,
    };
    // PGlite allows one process: the test seeds and schedules, then lets go before Hopper starts.
    let setup: Setup | undefined = await setUp(env);
    const { messageId } = setup;
    await setup.schedule();
    await setup.release();
    await setup.database.close();
    setup = undefined;

    const processes: HopperProcess[] = [];
    try {
      processes.push(startHopper(env));
      await waitFor('a third of the emails to go out', () => ours(sink, messageId).length >= RECIPIENTS / 3, { timeoutMs: 60_000 });
      await stopHopper(processes[0]!, 'SIGKILL');
      assert.ok(ours(sink, messageId).length < RECIPIENTS, 'killed before the end');
      // Its lock is stale now (the process is gone): read what it held, then let go again.
      const dead = await openDatabase(loadConfig(env));
      const held = await claimsHeld(dead, messageId);
      await dead.close();

      processes.push(startHopper(env));
      await untilSentThroughApi(`http://127.0.0.1:${port}`, adminKey, messageId, { timeoutMs: 60_000 });
      assert.equal(await stopHopper(processes[1]!), 0, 'a graceful stop');

      const database = await openDatabase(loadConfig(env));
      try {
        const { duplicated } = await assertSentOnce(database, sink, messageId, RECIPIENTS, held);
        t.diagnostic(`claims the dead worker held: ${held.size}; sent twice: ${duplicated}`);
      } finally {
        await database.close();
      }
    } finally {
      await Promise.all(processes.map((p) => stopHopper(p)));
      await sink.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('graceful stop', () => {
  test('PostgreSQL: SIGTERM mid-send gives the claims back at once; the next worker sends the rest, nothing twice', async (t) => {
    if (!usingPostgres) return t.skip('needs PostgreSQL: set DATABASE_URL (CI runs the suite on both databases)');
    const recipients = 1000;
    const dataDir = await mkdtemp(join(tmpdir(), 'hopper-stop-'));
    const sink = await startSmtpSink();
    const setup = await setUp(testConfigEnv(dataDir, { SMTP_URL: sink.url, MAIL_POSTAL_ADDRESS: TEST_POSTAL_ADDRESS }), recipients);
    // A long lease: only a claim given back, not one run out, lets the next worker go on at once.
    const workerEnv = { ...setup.env, ROLE: 'worker', DATABASE_URL: process.env.DATABASE_URL!, ...WORKER_ENV, SEND_LEASE: '10m' };
    const workers: HopperProcess[] = [];
    try {
      workers.push(startHopper(workerEnv));
      await workers[0]!.ready();
      await setup.schedule();
      await waitFor('a third of the emails to go out', () => ours(sink, setup.messageId).length >= recipients / 3);
      assert.equal(await stopHopper(workers[0]!, 'SIGTERM'), 0, 'it exits cleanly');
      assert.ok(ours(sink, setup.messageId).length < recipients, 'stopped before the end');
      assert.equal((await claimsHeld(setup.database, setup.messageId)).size, 0, 'no claim left behind');

      workers.push(startHopper(workerEnv));
      await workers[1]!.ready();
      await untilSent(setup.database, setup.messageId);
      await assertSentOnce(setup.database, sink, setup.messageId, recipients, new Set());
      assert.equal(ours(sink, setup.messageId).length, recipients, 'no email twice');
    } finally {
      await Promise.all(workers.map((w) => stopHopper(w)));
      await setup.release();
      await dropSchemas(setup.database, setup.env.DATABASE_SCHEMA!);
      await setup.database.close();
      await sink.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('two workers share one send', () => {
  test('PostgreSQL: two worker processes, one message to 4,000 contacts: both send, nobody twice', async (t) => {
    if (!usingPostgres) return t.skip('needs PostgreSQL: set DATABASE_URL (CI runs the suite on both databases)');
    const recipients = 4000;
    const dataDir = await mkdtemp(join(tmpdir(), 'hopper-share-'));
    const sink = await startSmtpSink();
    const setup = await setUp(testConfigEnv(dataDir, { SMTP_URL: sink.url, MAIL_POSTAL_ADDRESS: TEST_POSTAL_ADDRESS }), recipients);
    const workerEnv = { ...setup.env, ROLE: 'worker', DATABASE_URL: process.env.DATABASE_URL!, SEND_BATCH_SIZE: '50', LOG_LEVEL: 'debug' };
    const workers = [startHopper(workerEnv), startHopper(workerEnv)];
    try {
      await Promise.all(workers.map((w) => w.ready()));
      await setup.schedule();
      await untilSent(setup.database, setup.messageId);
      await assertSentOnce(setup.database, sink, setup.messageId, recipients, new Set());
      assert.equal(ours(sink, setup.messageId).length, recipients, 'no email twice');
      // Deliveries per worker, from their logs: each claimed a share, and the shares add up. Read
      // once they have stopped: a process writes its log in blocks, all of it by its exit.
      await Promise.all(workers.map((w) => stopHopper(w)));
      const claimed = workers.map((w) => w.logs('deliveries claimed').reduce((n, entry) => n + Number(entry.claimed), 0));
      t.diagnostic(`deliveries claimed per worker: ${claimed.join(' + ')}`);
      assert.ok(
        claimed.every((n) => n > 0),
        `both workers sent: ${claimed.join(' + ')}`,
      );
      assert.equal(claimed[0]! + claimed[1]!, recipients);
    } finally {
      await Promise.all(workers.map((w) => stopHopper(w)));
      await setup.release();
      await dropSchemas(setup.database, setup.env.DATABASE_SCHEMA!);
      await setup.database.close();
      await sink.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
