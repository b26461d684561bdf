import { type ChildProcess, fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { generate } from 'selfsigned';
import { Agent, request } from 'undici';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { bootstrapAdministrator } from '../src/identity/bootstrap.ts';
import { newSecret } from '../src/webhooks/signing.ts';

/**
 * `npm run bench:webhooks`: outbound webhook throughput and delay, as a user gets them. On
 * PostgreSQL (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres) in a fresh schema
 * dropped at the end, one user has one endpoint: an HTTPS receiver in a process of its own
 * (bench/webhook-receiver.ts). Hopper's worker runs as `npm start` runs it (`node src/main.ts`,
 * ROLE=worker) in its own process; the events are made by this process as contacts written in SQL
 * (the trigger path every change takes), committed in statements of up to 1,000 rows.
 *
 * 1. Baseline: this process posts BENCH_BASELINE (20,000) bodies of the same size to the receiver
 *    with a plain HTTP client (undici, keep-alive, as many in flight as the worker may have): the
 *    most a sender could get out of this receiver on this machine. Hopper's figures are given as
 *    ratios of it.
 * 2. Throughput: BENCH_EVENTS (100,000) events are committed before the worker starts; the time
 *    from the first arrival to the last gives events/s (target ≥ 2,000/s on one worker).
 * 3. Delay: BENCH_DELAY_EVENTS (10,000) more at BENCH_RATE (1,000/s, or half the throughput of
 *    step 2 when that is lower: a steady rate below capacity) with the worker running, in a
 *    commit every 50 ms; the delay from each commit (when the statement returned) to the event's
 *    arrival at the receiver, p50 and p99 (target p99 ≤ 2 s).
 *
 * Also printed: the CPU time each process spent per event (from /proc), the transactions the
 * database committed per 100 events (pg_stat_database), and the machine's load.
 */
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const EVENTS = Number(process.env.BENCH_EVENTS ?? 100_000);
const DELAY_EVENTS = Number(process.env.BENCH_DELAY_EVENTS ?? 10_000);
const BASELINE = Number(process.env.BENCH_BASELINE ?? 20_000);
const IN_FLIGHT = Number(process.env.WEBHOOK_MAX_IN_FLIGHT ?? 16);
const TARGET_PER_SECOND = 2_000;
const TARGET_P99_MS = 2_000;
const TICK_MS = 50;

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
/** CPU time (user + system) of a process so far, in ms. */
const cpuMs = (pid: number | undefined) => {
  if (pid === undefined) return Number.NaN;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
};

const schema = `bench_webhooks_${randomBytes(4).toString('hex')}`;
const dataDir = await mkdtemp(join(tmpdir(), 'hopper-bench-webhooks-'));
const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
  keyType: 'ec',
  curve: 'P-256',
  algorithm: 'sha256',
  extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }] }],
});
const caFile = join(dataDir, 'receiver.pem');
await writeFile(caFile, pems.cert);

// The receiver, in its own process.
const receiver = fork(join(import.meta.dirname, 'webhook-receiver.ts'), { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
let received = 0;
let onCount: () => void = () => {};
receiver.on('message', (message: { type: string; received?: number }) => {
  if (message.type === 'count') {
    received = message.received ?? 0;
    onCount();
  }
});
const ask = <T>(type: string, answer: string) =>
  new Promise<T>((resolve) => {
    const listener = (message: { type: string }) => {
      if (message.type !== answer) return;
      receiver.off('message', listener);
      resolve(message as T);
    };
    receiver.on('message', listener);
    receiver.send({ type });
  });
const port = await new Promise<number>((resolve) => {
  const listener = (message: { type: string; port?: number }) => {
    if (message.type !== 'port') return;
    receiver.off('message', listener);
    resolve(message.port ?? 0);
  };
  receiver.on('message', listener);
  receiver.send({ type: 'start', key: pems.private, cert: pems.cert });
});
const url = `https://localhost:${port}/hooks`;
/** Resolves once the receiver has counted `count` posts since its last reset. */
const until = (count: number) =>
  new Promise<void>((resolve) => {
    onCount = () => received >= count && resolve();
    onCount();
  });
const reset = () => ask('reset', 'count');

const env = {
  DATABASE_URL,
  DATABASE_SCHEMA: schema,
  DATA_DIR: dataDir,
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_CA_FILE: caFile,
  WEBHOOK_MAX_IN_FLIGHT: String(IN_FLIGHT),
};
const config = loadConfig(env);
const database = await openDatabase(config);
const { db } = database;
let worker: ChildProcess | undefined;
let failed = false;
const at = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;

try {
  console.log(`load average at the start: ${load()} (${process.env.NODE_ENV ?? 'no NODE_ENV'})`);
  const admin = await bootstrapAdministrator(db, config);
  if (admin.kind === 'none') throw new Error('no administrator');
  const now = new Date();
  await db
    .insertInto('webhook_endpoints')
    .values({ user_id: admin.userId, url, events: ['contact.created'], secret: newSecret(), created_at: now, updated_at: now })
    .execute();

  // 1. Baseline: a plain client, same receiver, same number in flight, a body of the same size.
  const agent = new Agent({ connections: IN_FLIGHT, allowH2: false, connect: { ca: pems.cert } });
  const body = JSON.stringify({
    type: 'contact.created',
    timestamp: new Date().toISOString(),
    data: { id: 1, email: 'baseline@bench.example', first_name: null, last_name: null, phone: null, status: 'Active', tags: [] },
  }).padEnd(520, ' ');
  let cpuBefore = [process.cpuUsage(), cpuMs(receiver.pid)] as const;
  let started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next++ < BASELINE) {
        const res = await request(url, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json' }, body });
        await res.body.dump();
      }
    }),
  );
  const baselineRate = BASELINE / ((performance.now() - started) / 1000);
  const clientCpu = process.cpuUsage(cpuBefore[0]);
  const perEvent = (ms: number, n: number) => `${((ms / n) * 1000).toFixed(0)} µs`;
  console.log(
    `baseline: a plain client posts ${baselineRate.toFixed(0)} requests/s to the receiver (${IN_FLIGHT} in flight); ` +
      `CPU per post: client ${perEvent((clientCpu.user + clientCpu.system) / 1000, BASELINE)}, receiver ${perEvent(cpuMs(receiver.pid) - cpuBefore[1], BASELINE)}`,
  );
  await agent.close();
  await reset();

  // 2. Throughput: a backlog of EVENTS, then the worker.
  console.log(`committing ${EVENTS.toLocaleString('en')} contacts (one contact.created event each)…`);
  await insertContacts(admin.userId, EVENTS, 'backlog');
  worker = spawn(process.execPath, [join(import.meta.dirname, '..', 'src', 'main.ts')], {
    env: { ...process.env, ...env, ROLE: 'worker' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  // The clock starts at the first arrival: the worker's start-up is not webhook throughput.
  await until(1);
  started = performance.now();
  cpuBefore = [process.cpuUsage(), cpuMs(receiver.pid)] as const;
  const workerCpuBefore = cpuMs(worker.pid);
  const loadDuring = load();
  const statementsBefore = await transactions();
  await until(EVENTS);
  const seconds = (performance.now() - started) / 1000;
  const rate = (EVENTS - 1) / seconds;
  console.log(
    `throughput: ${EVENTS.toLocaleString('en')} events delivered in ${seconds.toFixed(1)} s after the first: ` +
      `${rate.toFixed(0)} events/s — ${(rate / baselineRate).toFixed(2)}× the baseline; target ≥ ${TARGET_PER_SECOND}/s ${rate >= TARGET_PER_SECOND ? 'met' : 'NOT met'}`,
  );
  console.log(
    `  CPU per event: worker ${perEvent(cpuMs(worker.pid) - workerCpuBefore, EVENTS)}, receiver ${perEvent(cpuMs(receiver.pid) - cpuBefore[1], EVENTS)}; ` +
      `load average ${loadDuring} → ${load()}`,
  );
  await new Promise((resolve) => setTimeout(resolve, 1_000)); // the statistics collector's delay
  console.log(
    `  transactions on the database per 100 events (every process, pg-boss included): ${(((await transactions()) - statementsBefore) / (EVENTS / 100)).toFixed(1)}`,
  );

  // 3. Delay at a steady rate below capacity: commits every TICK_MS, each one's time kept by label.
  const RATE = Number(process.env.BENCH_RATE ?? Math.min(1_000, Math.round(rate / 2)));
  await reset();
  const committed = new Map<string, number>();
  const perTick = Math.max(1, Math.round((RATE * TICK_MS) / 1000));
  const delayStart = Date.now();
  for (let written = 0, tick = 0; written < DELAY_EVENTS; written += perTick, tick++) {
    const label = `steady${tick}`;
    await insertContacts(admin.userId, Math.min(perTick, DELAY_EVENTS - written), label);
    committed.set(label, Date.now());
    const due = delayStart + ((written + perTick) / RATE) * 1000;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
  }
  await until(DELAY_EVENTS);
  const { arrivals } = await ask<{ arrivals: Record<string, number[]> }>('report', 'report');
  const delays = Object.entries(arrivals)
    .flatMap(([label, times]) => times.map((t) => t - (committed.get(label) ?? Number.NaN)))
    .sort((a, b) => a - b);
  const p99 = at(delays, 0.99);
  console.log(
    `delay from commit to arrival at ${RATE}/s (${DELAY_EVENTS.toLocaleString('en')} events): p50 ${at(delays, 0.5)} ms, ` +
      `p90 ${at(delays, 0.9)} ms, p99 ${p99} ms, max ${at(delays, 1)} ms; target p99 ≤ ${TARGET_P99_MS} ms ${p99 <= TARGET_P99_MS ? 'met' : 'NOT met'}`,
  );
  const { rows } = await sql<{ state: string; n: string }>`SELECT state, count(*) AS n FROM webhook_deliveries GROUP BY state`.execute(db);
  console.log(`webhook deliveries by state: ${rows.map((r) => `${r.state} ${r.n}`).join(', ')}; load average at the end: ${load()}`);
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  worker?.kill('SIGTERM');
  if (worker && worker.exitCode === null) await new Promise((resolve) => worker?.once('exit', resolve));
  receiver.disconnect();
  await sql`DROP SCHEMA IF EXISTS ${sql.id(schema)} CASCADE`.execute(db);
  await sql`DROP SCHEMA IF EXISTS ${sql.id(`${schema}_pgboss`)} CASCADE`.execute(db);
  await database.close();
  await rm(dataDir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);

/** Transactions committed on this database so far (each statement outside a transaction is one). */
async function transactions(): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()`.execute(db);
  return Number(rows[0]?.n ?? Number.NaN);
}

/** `n` contacts in statements (each its own transaction) of up to 1,000 rows: each row's trigger writes its event. */
async function insertContacts(userId: number, n: number, label: string): Promise<void> {
  for (let done = 0; done < n; done += 1000) {
    const count = Math.min(1000, n - done);
    await sql`
      INSERT INTO contacts (user_id, email)
      SELECT ${userId}, ${label} || '-' || (${done}::integer + g) || '@bench.example'
      FROM generate_series(1, ${count}::integer) AS g`.execute(db);
  }
}
