import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { generateApiKey } from '../../src/api-key-format.ts';
import { loadConfig } from '../../src/config.ts';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import { openJobQueue } from '../../src/db/job-queue.ts';
import { bootstrapAdministrator } from '../../src/identity/bootstrap.ts';
import { scheduleNow, seedBulkSend } from '../sending/support/bulk-send.ts';
import { freePort, type HopperProcess, startHopper, stopHopper } from '../sending/support/hopper-process.ts';
import { type SmtpSink, startSmtpSink } from '../sending/support/smtp-sink.ts';
import { waitFor } from '../sending/support/wait.ts';
import { type PgCluster, startPgCluster } from '../support/pg-cluster.ts';
import { tools } from '../support/tools.ts';

/**
 * PostgreSQL going away under a running Hopper (`node src/main.ts`, ROLE=all) and coming back:
 * a cluster of the test's own is stopped for 10 s in the middle of API load and of a send, and
 * frozen (SIGSTOP) for a few seconds. Hopper must stay up, answer 503 `database_unavailable`
 * within 2 s (never hang, never refuse the connection), say 503 on /health, pause its send
 * without losing or doubling anything, and work again within 5 s of the database's return. A
 * second worker process shares the send, and the outage is longer than a lease: neither may take
 * over, and send again, what the other sent before the outage.
 */
const OUTAGE_MS = 10_000;
const RECIPIENTS = 1500;
// A little slack over the 2 s the issue asks for, for a loaded 2-core machine: the timeouts
// themselves are 1 s (DATABASE_TIMEOUT) + 0.25 s.
const ANSWER_WITHIN_MS = 2_000;

interface Answer {
  status: number;
  code: string | undefined;
  ms: number;
  at: number;
}

describe('PostgreSQL going away and coming back', { skip: tools.postgresServer.skip }, () => {
  let cluster: PgCluster;
  let sink: SmtpSink;
  let hopper: HopperProcess;
  let worker: HopperProcess;
  let database: DatabaseHandle;
  let dataDir: string;
  let base: string;
  let messageId: number;
  const adminKey = generateApiKey();

  before(async () => {
    cluster = await startPgCluster();
    sink = await startSmtpSink({ delayMs: 15 });
    dataDir = await mkdtemp(join(tmpdir(), 'hopper-outage-'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const env = {
      DATA_DIR: dataDir,
      DATABASE_URL: cluster.url,
      PUBLIC_URL: 'https://hopper.test',
      PORT: String(port),
      HOST: '127.0.0.1',
      TRUST_PROXY: 'true',
      BOOTSTRAP_ADMIN_KEY: adminKey,
      SMTP_URL: sink.url,
      MAIL_FROM: 'Hopper <no-reply@hopper.test>',
      SMTP_MAX_CONNECTIONS: '2',
      SEND_BATCH_SIZE: '20',
      // Shorter than the outage: every claim's lease runs out while the database is away.
      SEND_LEASE: '4s',
      LOG_LEVEL: 'info',
      // Tens of thousands of requests with one key: the per-key limit (a 429) is not what is tested.
      RATE_LIMIT: '10000000',
    };
    const config = loadConfig(env);
    database = await openDatabase(config);
    const bootstrap = await bootstrapAdministrator(database.db, config);
    assert.ok(bootstrap.kind !== 'none');
    ({ messageId } = await seedBulkSend(database.db, bootstrap.userId, RECIPIENTS));
    hopper = startHopper(env);
    worker = startHopper({ ...env, ROLE: 'worker', PORT: String(await freePort()) });
    // Generous: a loaded machine starts a process slowly (what is measured comes after).
    await hopper.ready(120_000);
    await worker.ready(120_000);
    await waitFor('the API to listen', async () => (await request('/health')).status === 200, { timeoutMs: 60_000 });
  });

  after(async () => {
    await stopHopper(hopper);
    await stopHopper(worker);
    if (process.env.OUTAGE_LOG) await writeFile(process.env.OUTAGE_LOG, hopper.output());
    await database?.close();
    await sink?.close();
    await cluster?.destroy();
    await rm(dataDir, { recursive: true, force: true });
  });

  async function request(path: string): Promise<Answer> {
    const started = Date.now();
    try {
      const reply = await fetch(`${base}${path}`, {
        headers: { authorization: `Bearer ${adminKey}`, 'x-forwarded-proto': 'https' },
        signal: AbortSignal.timeout(15_000),
      });
      const text = await reply.text();
      let code: string | undefined;
      if (reply.headers.get('content-type')?.startsWith('application/problem+json')) code = JSON.parse(text).type.split('/').pop();
      return { status: reply.status, code, ms: Date.now() - started, at: started };
    } catch (error) {
      return { status: 0, code: String((error as Error).cause ?? error), ms: Date.now() - started, at: started };
    }
  }

  /** Requests from 8 clients in a loop until `until()`; every answer. */
  async function load(paths: string[], until: () => boolean): Promise<Answer[]> {
    const answers: Answer[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        while (!until()) answers.push(await request(paths[i % paths.length]!));
      }),
    );
    return answers;
  }

  function assertOutageAnswers(answers: Answer[]) {
    const wrong = answers.filter((a) => !(a.status === 200 || a.status === 404 || (a.status === 503 && a.code === 'database_unavailable')));
    assert.deepEqual(wrong.slice(0, 5), [], `every answer is 200, 404 or 503 database_unavailable (${wrong.length} are not)`);
    const slow = answers.filter((a) => a.ms > ANSWER_WITHIN_MS);
    assert.deepEqual(
      slow.slice(0, 5).map((a) => a.ms),
      [],
      `every answer within ${ANSWER_WITHIN_MS} ms (${slow.length} of ${answers.length} were slower)`,
    );
  }

  test('stopped for 10 s under API load: 503 database_unavailable within 2 s, /health 503, back within 5 s', async (t) => {
    let stopAt = 0;
    let restartedAt = 0;
    let startAskedAt = 0;
    let backAfter = 0;
    let done = false;
    const running = load(['/v3/users', '/health', '/v3/tags/1'], () => done);
    // The load stops whatever happens: a failed step must not leave it running.
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await cluster.stop('fast');
      // From here the server is down (pg_ctl waits for its shutdown, which may take a while on a
      // loaded machine: requests served meanwhile are not "during the outage").
      stopAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
      // The outage ends when the start is asked for: pg_ctl returns only after it has seen the server
      // accept connections, and Hopper may already have served requests in that moment.
      startAskedAt = Date.now();
      await cluster.start();
      restartedAt = Date.now();
      // Back: the first moment from which /health and the API answer 200 again.
      await waitFor(
        'Hopper to work again',
        async () => (await request('/health')).status === 200 && (await request('/v3/users')).status === 200,
        { timeoutMs: 5_000 },
      );
      backAfter = Date.now() - restartedAt;
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      done = true;
    }
    const answers = await running;
    assert.equal(hopper.child.exitCode, null, 'Hopper is still running');
    const during = answers.filter((a) => a.at > stopAt + 200 && a.at + a.ms < startAskedAt);
    assert.ok(during.length > 20, `requests were made during the outage (${during.length})`);
    const not503 = during.filter((a) => a.status !== 503);
    assert.deepEqual(not503.slice(0, 3), [], `every request during the outage answered 503 (${not503.length} did not)`);
    assert.ok(
      during.some((a) => a.code === 'database_unavailable'),
      '/health and the API said database_unavailable',
    );
    assertOutageAnswers(answers);
    // An outage is expected, waited out and answered: logged as warnings, never as errors.
    const errors = hopper
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{') && (JSON.parse(line) as { level: number }).level >= 50);
    assert.deepEqual(errors.slice(0, 3), [], `no error-level log line during the outage (${errors.length})`);
    t.diagnostic(
      `${answers.length} requests, ${during.length} during the outage (slowest ${Math.max(...during.map((a) => a.ms))} ms); back ${backAfter} ms after the restart`,
    );
  });

  test('frozen (SIGSTOP) for 4 s: requests answer 503 within 2 s instead of hanging, then 200', async (t) => {
    let done = false;
    let frozenAt = 0;
    let thawedAt = 0;
    const running = load(['/v3/users', '/health'], () => done);
    try {
      await new Promise((resolve) => setTimeout(resolve, 500));
      cluster.signal('SIGSTOP');
      frozenAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      cluster.signal('SIGCONT');
      thawedAt = Date.now();
      await waitFor('Hopper to work again', async () => (await request('/v3/users')).status === 200, { timeoutMs: 5_000 });
    } finally {
      cluster.signal('SIGCONT');
      done = true;
    }
    const answers = await running;
    const during = answers.filter((a) => a.at > frozenAt + 100 && a.at + a.ms < thawedAt);
    assertOutageAnswers(answers);
    assert.ok(during.length >= 4, `requests were made while frozen (${during.length})`);
    assert.equal(hopper.child.exitCode, null, 'Hopper is still running');
    t.diagnostic(`${during.length} requests while frozen, slowest ${Math.max(...answers.map((a) => a.ms))} ms`);
  });

  test('stopped for 10 s mid-send: the send pauses and completes, nothing lost, nothing doubled', async (t) => {
    const queue = await openJobQueue(database, loadConfig({ DATABASE_URL: cluster.url, DATA_DIR: dataDir }));
    await scheduleNow(database.db, queue, messageId);
    await queue.stop();
    const ours = () => sink.messages.filter((m) => m.messageId.startsWith(`<templated_email-${messageId}.`));
    await waitFor('a fifth of the emails to go out', () => ours().length >= RECIPIENTS / 5, { timeoutMs: 60_000 });
    await cluster.stop('fast');
    const sentBefore = ours().length;
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
    const sentDuring = ours().length - sentBefore;
    await cluster.start();
    await waitFor(
      'the message to be Sent',
      async () => {
        const row = await database.db.selectFrom('templated_emails').select('status').where('id', '=', messageId).executeTakeFirst();
        return row?.status === 'Sent';
      },
      { timeoutMs: 90_000 },
    );
    const deliveries = await database.db.selectFrom('deliveries').selectAll().where('message_id', '=', messageId).execute();
    assert.equal(deliveries.length, RECIPIENTS);
    assert.ok(
      deliveries.every((d) => d.state === 'sent'),
      'every delivery sent (none failed or lost)',
    );
    const counts = sink.countsByMessageId();
    const twice = [...counts].filter(([id, n]) => id.startsWith(`<templated_email-${messageId}.`) && n > 1);
    assert.equal(twice.length, 0, `no email twice (${twice.length} were)`);
    assert.equal(ours().length, RECIPIENTS, 'every email arrived once');
    const counted = await sql<{
      sent: string;
    }>`SELECT coalesce(sum(sent), 0) AS sent FROM message_counters WHERE message_id = ${messageId}`.execute(database.db);
    assert.equal(Number(counted.rows[0]!.sent), RECIPIENTS, 'the counters are exact');
    assert.equal(hopper.child.exitCode, null, 'Hopper is still running');
    assert.equal(worker.child.exitCode, null, 'the second worker is still running');
    t.diagnostic(`sent before the outage: ${sentBefore}; during it: ${sentDuring}`);
  });
});
