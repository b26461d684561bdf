import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.ts';
import { type Db, openDatabase } from '../src/db/database.ts';
import { openJobQueue } from '../src/db/job-queue.ts';
import { bootstrapAdministrator } from '../src/identity/bootstrap.ts';
import { scheduleNow, seedBulkSend } from '../test/sending/support/bulk-send.ts';
import type { LoadJob, LoadResult } from './load-job.ts';
import { seedOwner } from './seed-drops.ts';
import { freePort, METRICS_TOKEN, metricMb, peakRssMb, readMetrics, startWorker, type Worker } from './send-setup.ts';
import { startSink } from './sink.ts';

/**
 * `npm run bench:soak`: the memory of the `npm start` process (ROLE=all: the API and the sending
 * engine in one process) through SOAK_SECONDS of mixed load, against issue 27's target: peak RSS
 * ≤ 250 MB through 10 minutes of reads, searches, creates and a 10,000-recipient send.
 *
 * On a fresh schema (dropped at the end, with its pg-boss schema) and DATA_DIR: one owner with an
 * API key, 10,000 voicemail drops (SQL, as bench/api.ts seeds them) and 10,000 contacts with a
 * templated email to them (bench/send.ts's seed). Hopper runs as `npm start` runs it (its Node
 * flags and environment from package.json, ROLE=all, the default LOG_LEVEL, RATE_LIMIT=10000000 so
 * the one key is not throttled, SMTP to a local sink, bench/smtp-sink.ts). Three load generators
 * (bench/api.ts's, autocannon, each a process of its own) run at once, in back-to-back slices of
 * 60 s: reads of random drops (8 connections), searches `status=<one of five>&name=<3 fresh
 * letters>` (8) and creates of drops (4). When the first slice ends the templated email is made due,
 * so its 10,000 deliveries go out under the load. Between slices the tables are ANALYZEd, as
 * autovacuum would (it is off on this machine's PostgreSQL).
 *
 * The service's RSS is read from /proc every second (VmRSS; its V8 heap used from /metrics every
 * 5 s). Per minute it prints: requests/s of each kind, failed requests, the highest RSS and heap
 * used. At the end: the peak RSS (VmHWM) against the target, the send's rate (deliveries over
 * sending_at → sent_at) and what the sink received, the load average and the core count.
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * BENCH_SOAK_SECONDS (600), BENCH_SOAK_SLICE (seconds per slice, 60), BENCH_WORKER_FLAGS (Node
 * flags for the service, e.g. `--heapsnapshot-near-heap-limit=1`), BENCH_VERBOSE=1 (show its log).
 */
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const SOAK_SECONDS = Number(process.env.BENCH_SOAK_SECONDS ?? 600);
const SLICE_SECONDS = Number(process.env.BENCH_SOAK_SLICE ?? 60);
const DROPS = 10_000;
const RECIPIENTS = 10_000;
const RSS_TARGET_MB = 250;
const PUBLIC_URL = 'https://hopper.bench';
/** The searches' status filters, one drawn per request, each with fresh letters (as bench/api.ts's). */
const SEARCH_STATUSES = ['Saved', 'Sent', 'Scheduled', 'Failed', 'Cancelled'];

/** Runs bench/api.ts's load generator (autocannon) in a process of its own. */
function load(job: LoadJob): Promise<LoadResult> {
  const child = fork(join(import.meta.dirname, 'api.ts'), ['--load'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise<LoadResult>((resolve, reject) => {
    child.once('message', (result) => resolve(result as LoadResult));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`load generator exited with ${code}`));
    });
    child.send(job);
  });
}

/** Every table of the schema ANALYZEd, as autovacuum would after this many changes. */
async function analyze(db: Db, schema: string): Promise<void> {
  const tables = await sql<{ name: string }>`SELECT tablename AS name FROM pg_tables WHERE schemaname = ${schema}`.execute(db);
  for (const { name } of tables.rows) await sql`ANALYZE ${sql.table(name)}`.execute(db);
}

function health(base: string): Promise<number> {
  return new Promise((resolve) => {
    request(`${base}/health`, { rejectUnauthorized: false, agent: false }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    })
      .on('error', () => resolve(0))
      .end();
  });
}

async function vmRssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) / 1024;
}

interface Minute {
  reads: LoadResult;
  searches: LoadResult;
  creates: LoadResult;
  seconds: number;
  rssMaxMb: number;
  heapUsedMaxMb: number;
  note: string;
}

async function main(): Promise<void> {
  const startLoad = loadavg();
  console.log(
    `bench:soak — npm start (ROLE=all), ${SOAK_SECONDS} s of mixed load in slices of ${SLICE_SECONDS} s, ${DATABASE_URL.replace(/\/\/[^@]*@/, '//')}`,
  );
  console.log(`load average (1 min) at the start: ${startLoad[0]!.toFixed(2)} on ${availableParallelism()} cores`);
  const dataDir = await mkdtemp(join(tmpdir(), 'hopper-bench-'));
  const schema = `bench_${randomBytes(5).toString('hex')}`;
  const env = { DATABASE_URL, DATABASE_SCHEMA: schema, DATA_DIR: dataDir, PUBLIC_URL, MAIL_FROM: 'Hopper <no-reply@hopper.bench>' };
  const config = loadConfig({ ...env, LOG_LEVEL: 'silent' });
  const database = await openDatabase(config);
  const queue = await openJobQueue(database, config);
  const sink = await startSink();
  let worker: Worker | undefined;
  try {
    const bootstrap = await bootstrapAdministrator(database.db, config);
    if (bootstrap.kind !== 'first-start') throw new Error('expected a fresh schema');
    const seeding = performance.now();
    const owner = await seedOwner(database.db, 'soak', DROPS);
    const { messageId } = await seedBulkSend(database.db, owner.userId, RECIPIENTS);
    await analyze(database.db, schema);
    console.log(
      `seeded one owner: ${DROPS.toLocaleString('en-US')} drops, ${RECIPIENTS.toLocaleString('en-US')} contacts and a templated email to them, in ${((performance.now() - seeding) / 1000).toFixed(1)} s`,
    );
    await sink.reset();

    const port = String(await freePort());
    worker = startWorker(
      {
        ...env,
        ROLE: 'all',
        PORT: port,
        HOST: '127.0.0.1',
        METRICS_TOKEN,
        LOG_LEVEL: 'info',
        RATE_LIMIT: '10000000',
        SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
      },
      1,
    );
    await worker.ready;
    const base = `https://127.0.0.1:${port}`;
    while ((await health(base)) !== 200) await new Promise((resolve) => setTimeout(resolve, 20));
    const pid = worker.child.pid!;
    let died = false;
    void worker.exited.then(() => {
      died = true;
    });
    console.log(`service started: RSS ${(await vmRssMb(pid)).toFixed(0)} MB, peak so far ${(await peakRssMb(pid)).toFixed(0)} MB`);

    // The samplers: RSS every second, heap used every 5 s, each into the current minute's maximum.
    let current = { rssMaxMb: 0, heapUsedMaxMb: 0 };
    let sampling = true;
    const sampler = (async () => {
      for (let tick = 0; sampling; tick++) {
        current.rssMaxMb = Math.max(current.rssMaxMb, await vmRssMb(pid));
        if (tick % 5 === 0) {
          const text = await readMetrics(port).catch(() => '');
          if (text) current.heapUsedMaxMb = Math.max(current.heapUsedMaxMb, metricMb(text, 'hopper_nodejs_heap_size_used_bytes'));
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    })();

    // The send: made due after the first slice, then watched until it is Sent (or Failed).
    type SendRow = { status: string; sending_at: Date | null; sent_at: Date | null; reason: string | null };
    let send: { dueAt: number; doneAt?: number; row?: SendRow } | undefined;
    let watching = true;
    const watchSend = async () => {
      while (watching && send && !send.doneAt) {
        const row = await database.db
          .selectFrom('templated_emails')
          .select(['status', 'sending_at', 'sent_at', 'reason'])
          .where('id', '=', messageId)
          .executeTakeFirst();
        if (row && (row.status === 'Sent' || row.status === 'Failed')) {
          send.row = row;
          send.doneAt = performance.now();
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    };
    let sendWatch: Promise<void> = Promise.resolve();

    const headers = { authorization: `Bearer ${owner.key}` };
    const readJob = { base, method: 'GET' as const, paths: owner.sampleIds.map((id) => `/v3/voicemail_drops/${id}`), headers };
    const searchJob = {
      base,
      method: 'GET' as const,
      paths: SEARCH_STATUSES.map((status) => `/v3/users/${owner.userId}/voicemail_drops?status=${status}&name={letters}`),
      headers,
    };
    const createJob = {
      base,
      method: 'POST' as const,
      paths: [`/v3/users/${owner.userId}/voicemail_drops`],
      headers,
      body: JSON.stringify({ provider: 'Sandbox', media_id: owner.mediaId, callback_number: '7272329117', name: 'Soak {n}' }),
    };

    console.log('');
    console.log('minute   reads/s  searches/s  creates/s   failed   RSS max   heap used max');
    const minutes: Minute[] = [];
    const soakStarted = performance.now();
    let remaining = SOAK_SECONDS;
    let sendNoted = false;
    for (let index = 0; remaining > 0; index++) {
      if (died) throw new Error('the service exited during the soak');
      const seconds = Math.min(SLICE_SECONDS, remaining);
      remaining -= seconds;
      current = { rssMaxMb: 0, heapUsedMaxMb: 0 };
      let note = '';
      if (index === 1) {
        await scheduleNow(database.db, queue, messageId);
        send = { dueAt: performance.now() };
        sendWatch = watchSend();
        note = 'send due';
      }
      const [reads, searches, creates] = await Promise.all([
        load({ ...readJob, duration: seconds, connections: 8 }),
        load({ ...searchJob, duration: seconds, connections: 8 }),
        load({ ...createJob, duration: seconds, connections: 4 }),
      ]);
      if (send?.doneAt && !sendNoted) {
        // The minute in which the send ended.
        note = `${note}${note ? ', ' : ''}send ${send.row?.status} at ${((send.doneAt - soakStarted) / 1000).toFixed(0)} s`;
        sendNoted = true;
      }
      const minute = { reads, searches, creates, seconds, ...current, note };
      minutes.push(minute);
      const failed = reads.bad + searches.bad + creates.bad;
      console.log(
        `${String(index + 1).padStart(6)} ${reads.requestsPerSecond.toFixed(0).padStart(9)} ${searches.requestsPerSecond.toFixed(0).padStart(11)} ${creates.requestsPerSecond.toFixed(0).padStart(10)} ${String(failed).padStart(8)} ${`${minute.rssMaxMb.toFixed(0)} MB`.padStart(9)} ${`${minute.heapUsedMaxMb.toFixed(0)} MB`.padStart(15)}${note ? `   ${note}` : ''}`,
      );
      if (remaining > 0) await analyze(database.db, schema);
    }
    const soakSeconds = (performance.now() - soakStarted) / 1000;
    const peakDuringLoad = await peakRssMb(pid);

    // A send that outlasts the load is waited for (and said so).
    if (send && !send.doneAt) {
      console.log('the send had not finished when the load ended: waiting for it (up to 300 s)');
      const deadline = Date.now() + 300_000;
      while (!send.doneAt && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 500));
    }
    watching = false;
    await sendWatch;
    sampling = false;
    await sampler;
    const peak = await peakRssMb(pid);
    const endLoad = loadavg();

    const totals = (pick: (m: Minute) => LoadResult) => {
      const total = minutes.reduce((sum, m) => sum + pick(m).total, 0);
      const bad = minutes.reduce((sum, m) => sum + pick(m).bad, 0);
      const p99 = Math.max(...minutes.map((m) => pick(m).p99));
      return `${total.toLocaleString('en-US')} (${(total / soakSeconds).toFixed(0)}/s, ${bad} failed, worst minute's p99 ${p99} ms)`;
    };
    console.log('');
    console.log(`requests over ${soakSeconds.toFixed(0)} s: reads ${totals((m) => m.reads)}`);
    console.log(`  searches ${totals((m) => m.searches)}`);
    console.log(`  creates ${totals((m) => m.creates)}`);
    const drops = await database.db
      .selectFrom('voicemail_drops')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('user_id', '=', owner.userId)
      .executeTakeFirstOrThrow();
    console.log(`  the owner now has ${Number(drops.n).toLocaleString('en-US')} drops`);

    const verdicts: [string, boolean][] = [];
    if (send?.row) {
      const { row } = send;
      const counted = await sql<{
        sent: string;
      }>`SELECT coalesce(sum(sent), 0) AS sent FROM message_counters WHERE message_kind = 'templated_email' AND message_id = ${messageId}`.execute(
        database.db,
      );
      const sent = Number(counted.rows[0]?.sent);
      const { received, distinct } = await sink.count();
      const seconds = row.sent_at && row.sending_at ? (row.sent_at.getTime() - row.sending_at.getTime()) / 1000 : Number.NaN;
      const dueToDone = ((send.doneAt! - send.dueAt) / 1000).toFixed(0);
      const endedAt = ((send.doneAt! - soakStarted) / 1000).toFixed(0);
      console.log(
        `send: ${RECIPIENTS.toLocaleString('en-US')} recipients, ${row.status}${row.reason ? ` (${row.reason})` : ''} ${endedAt} s into the soak, ${seconds.toFixed(1)} s sending_at → sent_at: ${(RECIPIENTS / seconds).toFixed(0)} messages/s under the load (${dueToDone} s from due to Sent)`,
      );
      console.log(`  counted sent ${sent}; the sink received ${received} (${distinct} distinct addresses)`);
      verdicts.push([
        `the send ended Sent with ${RECIPIENTS} delivered to the sink (${distinct})`,
        row.status === 'Sent' && distinct === RECIPIENTS && sent === RECIPIENTS,
      ]);
    } else if (send) {
      verdicts.push(['the send did not finish', false]);
    } else {
      console.log(`send: not made (the soak was shorter than one slice of ${SLICE_SECONDS} s)`);
    }
    const failed = minutes.reduce((sum, m) => sum + m.reads.bad + m.searches.bad + m.creates.bad, 0);
    verdicts.push([`no failed requests (${failed})`, failed === 0]);
    console.log(
      `peak RSS (VmHWM) ${peak.toFixed(0)} MB (${peakDuringLoad.toFixed(0)} MB when the load ended); highest VmRSS sampled ${Math.max(...minutes.map((m) => m.rssMaxMb)).toFixed(0)} MB`,
    );
    console.log(
      `\nload average (1/5/15 min): start ${startLoad.map((l) => l.toFixed(2)).join(' ')}, end ${endLoad.map((l) => l.toFixed(2)).join(' ')} on ${availableParallelism()} cores`,
    );
    verdicts.unshift([
      `npm start (ROLE=all) peak RSS through ${soakSeconds.toFixed(0)} s of mixed load ≤ ${RSS_TARGET_MB} MB (${peak.toFixed(0)} MB)`,
      peak <= RSS_TARGET_MB,
    ]);
    for (const [text, pass] of verdicts) console.log(`${pass ? 'PASS' : 'MISS'}  ${text}`);
  } finally {
    if (worker) {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    sink.stop();
    await queue.stop();
    await sql`DROP SCHEMA IF EXISTS ${sql.id(schema)} CASCADE`.execute(database.db);
    await sql`DROP SCHEMA IF EXISTS ${sql.id(`${schema}_pgboss`)} CASCADE`.execute(database.db);
    await database.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
