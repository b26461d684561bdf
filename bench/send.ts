import { fork } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import nodemailer from 'nodemailer';
import { loadConfig } from '../src/config.ts';
import { type Db, openDatabase } from '../src/db/database.ts';
import { openJobQueue } from '../src/db/job-queue.ts';
import type { TemplatedEmailRow } from '../src/db/schema.ts';
import type { PreparedEmail } from '../src/email/render.ts';
import { renderEmail } from '../src/email/render.ts';
import { senderIdentity } from '../src/email/sender-identity.ts';
import { TrackingTokens } from '../src/email/tokens.ts';
import { bootstrapAdministrator } from '../src/identity/bootstrap.ts';
import type { ClaimedDelivery } from '../src/sending/deliveries.ts';
import { scheduleNow, seedBulkSend } from '../test/sending/support/bulk-send.ts';
import { cpuMeter } from './cpu.ts';
import { npmStartSettings } from './npm-start.ts';
import { freePort, METRICS_TOKEN, memorySampler, peakRssMb, startWorker, type Worker } from './send-setup.ts';
import { type Sink, startSink } from './sink.ts';
import { medianOf } from './turns.ts';

/**
 * `npm run bench:send`: one templated email to BENCH_CONTACTS (100,000) contacts through SMTP to
 * a local sink (a child process, bench/smtp-sink.ts), sent by Hopper worker processes
 * (`ROLE=worker node src/main.ts`) on PostgreSQL, against a baseline of nodemailer's pooled
 * transport, in a process of its own, sending the same number of messages straight to the same sink, each rendered for its
 * recipient by Hopper's renderEmail inside the baseline's clock (until 2026-11-29 they were rendered
 * before it started: a cost Hopper's figure paid and the baseline's did not). Every run prints the
 * bytes of a message at the sink, so the two senders' messages can be seen to be the same size.
 *
 * Runs: baseline; one worker at the full count; one worker at a tenth of it (peak memory must not
 * grow with the recipient count); two workers at the full count; one worker signing every email
 * with DKIM, RSA-2048 and Ed25519. Each Hopper run uses a fresh
 * schema, dropped at the end. Rates are deliveries over the message's sending_at → sent_at, so they
 * include resolving the recipients but not process start-up.
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_CONTACTS,
 * SMTP_MAX_CONNECTIONS (per process, default 5, used by the baseline too), BENCH_RUNS (comma list of
 * baseline,all-baseline,all,one,small,two,dkim,dkim-ed25519 to run a subset; `all` is `npm start`'s ROLE=all
 * with BENCH_ALL_CONTACTS, 10,000, against `all-baseline`, the baseline at that count: with both, BENCH_ALL_TURNS (3)
 * turns of the pair, the first of each alternating, judged by the median ratio, the highest peak RSS and the
 * duplicates the sink received over every turn), BENCH_WORKER_FLAGS (Node flags for the workers, e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile them), BENCH_VERBOSE=1 (show the workers' output), BENCH_V8_DEFAULTS=1 (the `all` run with Node's defaults instead of `npm start`'s memory flags).
 */
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const CONTACTS = Number(process.env.BENCH_CONTACTS ?? 100_000);
const SMALL = Math.max(1000, Math.round(CONTACTS / 10));
const CONNECTIONS = Number(process.env.SMTP_MAX_CONNECTIONS ?? 5);
const RUNS = new Set((process.env.BENCH_RUNS ?? 'baseline,all-baseline,all,one,small,two,dkim,dkim-ed25519').split(','));
const RSS_LIMIT_MB = 200;
/** Recipients of the `npm start` run (ROLE=all: the API and the engine in one process). */
const ALL_CONTACTS = Number(process.env.BENCH_ALL_CONTACTS ?? 10_000);

interface RunResult {
  label: string;
  n: number;
  seconds: number;
  perSecond: number;
  peakRssMb: number[];
  /** Peak RSS of each process once started, before the send began. */
  rssBeforeMb?: number[];
  /** Bytes of one message's data at the sink, on average: the two senders' messages are the same size, or the rates are not comparable. */
  bytes: number;
  /** Messages the sink received more than once (by Message-ID): a Hopper run's must be 0. */
  duplicates?: number;
  /** CPU microseconds per message: the sender(s), the sink, PostgreSQL (all its processes on this machine, whoever uses them). */
  cpu: { sender: number; sink: number; postgres: number };
}

/** Measures the CPU that the given processes, the sink and PostgreSQL spend between the call and the returned function's. */
function sendMeter(sink: Sink, senders: () => number[]) {
  return cpuMeter({ sender: senders, sink: () => [sink.pid] });
}

/**
 * The baseline, in a process of its own (as each Hopper run is: until 2026-11-29 it ran in the
 * bench's process, whose pools, samplers and earlier runs it then shared — its rate at 10,000 fell
 * from 1,420–1,634 a second in a fresh bench to 812–891 after the 100,000-message runs). The child
 * warms up, says so, sends the measured `n` when told to go, and reports its seconds.
 */
async function baseline(sink: Sink, n: number): Promise<RunResult> {
  const child = fork(import.meta.filename, ['--baseline', String(sink.port), String(n)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const next = () =>
    new Promise<{ warm?: true; seconds?: number }>((resolve, reject) => {
      child.once('message', (message) => resolve(message as { warm?: true; seconds?: number }));
      void exited.then((code) => reject(new Error(`the baseline's process exited with ${code}`)));
    });
  try {
    await next(); // warmed up
    await sink.reset();
    const meter = await sendMeter(sink, () => [child.pid as number]);
    const done = next();
    child.send('go');
    const { seconds = Number.NaN } = await done;
    const cpu = await meter(n);
    const { received, bytes } = await sink.count();
    if (received !== n) throw new Error(`baseline: the sink received ${received} of ${n}`);
    return { label: 'nodemailer pool (baseline)', n, seconds, perSecond: n / seconds, peakRssMb: [], cpu, bytes: bytes / n };
  } finally {
    child.kill();
    await exited;
  }
}

/** The baseline's process (`--baseline <sink port> <n>`): see baseline(). */
async function baselineProcess(port: number, n: number): Promise<void> {
  // The same rendering Hopper does (renderEmail), of each message for its recipient.
  const message = {
    id: 1,
    user_id: 1,
    subject: 'New listings for you, {{first_name}}',
    greeting_with_first_name: 'Hi {{first_name}},',
    greeting_without_first_name: 'Hi,',
    body: '<p>We have a few new listings near you this week, {{first_name}}.</p><p>Would a short call on Thursday suit you?</p>',
    closing: 'Talk soon,',
    ps_line: 'Reply with any question.',
    signature_id: null,
  } as TemplatedEmailRow;
  // Prepared as the worker's channel prepares it (email-channel.ts), for the seeded administrator.
  const config = loadConfig({ DATA_DIR: tmpdir(), PUBLIC_URL: 'https://hopper.bench' });
  const owner = {
    first_name: 'Hopper',
    last_name: 'Administrator',
    email: 'admin@hopper.bench',
    sender_name: null,
    sender_email: null,
    postal_address: null,
  };
  const prepared: PreparedEmail = {
    message,
    signatureHtml: null,
    sender: senderIdentity(owner, config),
    domain: 'hopper.bench',
    publicUrl: config.publicUrl,
    tokens: new TrackingTokens(randomBytes(32)),
  };
  const delivery = (i: number) =>
    ({
      id: i,
      message_kind: 'templated_email',
      message_id: 1,
      address: `bulk-${i}@example.test`,
      first_name: i % 10 === 0 ? null : `First${i}`,
      last_name: `Last${i}`,
    }) as ClaimedDelivery;
  const transport = nodemailer.createTransport({
    url: `smtp://127.0.0.1:${port}`,
    pool: true,
    maxConnections: CONNECTIONS,
    maxMessages: Number.POSITIVE_INFINITY,
  } as never);
  // Each message is rendered for its recipient inside the clock, as Hopper renders each delivery
  // inside its own: the least a sender of personalised emails must do is to personalise them.
  const sendAll = async (first: number, count: number) => {
    let next = first;
    const lane = async () => {
      while (next < first + count) await transport.sendMail(renderEmail(prepared, delivery(next++)));
    };
    // Enough messages in flight to keep every pooled connection busy.
    await Promise.all(Array.from({ length: CONNECTIONS * 4 }, lane));
  };
  // Warmed up as Hopper's process is (see WARM_UP), its connections open.
  await sendAll(n + 1, WARM_UP);
  const go = new Promise((resolve) => process.once('message', resolve));
  process.send?.({ warm: true });
  await go;
  const started = performance.now();
  await sendAll(1, n);
  const seconds = (performance.now() - started) / 1000;
  process.send?.({ seconds });
  transport.close();
}

/** DKIM settings for a run: a fresh key of the given type in the run's data directory, MAIL_FROM at the signing domain. */
async function dkimEnv(dataDir: string, type: 'rsa' | 'ed25519'): Promise<Record<string, string>> {
  const { privateKey } = type === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: 2048 }) : generateKeyPairSync('ed25519');
  const file = join(dataDir, `dkim-${type}.pem`);
  await writeFile(file, privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, { mode: 0o600 });
  return { DKIM_DOMAIN: 'hopper.bench', DKIM_SELECTOR: 'bench', DKIM_PRIVATE_KEY_FILE: file, MAIL_FROM: 'Hopper <mail@hopper.bench>' };
}

/**
 * Messages each sender sends before its measured run (BENCH_WARM_UP, 2,000): the baseline through
 * its pool, each Hopper process as a message of its own. A service that has been running is warm;
 * a cold process spends its first seconds compiling (until 2026-11-29 both ran cold, and the
 * baseline, in the bench's own process, was warm from its second run on: 828 a second cold,
 * 1,145–1,205 warm).
 */
const WARM_UP = Number(process.env.BENCH_WARM_UP ?? 2000);

/** Waits until templated email `id` has been sent (or failed: an error); its sending_at and sent_at. */
async function untilSent(db: Db, id: number, n: number) {
  // Generous on a busy machine: the figures say how long it took.
  const deadline = Date.now() + Math.max(240_000, n * 100);
  for (;;) {
    const row = await db
      .selectFrom('templated_emails')
      .select(['status', 'sending_at', 'sent_at', 'reason'])
      .where('id', '=', id)
      .executeTakeFirst();
    if (row?.status === 'Sent') return row;
    if (row?.status === 'Failed') throw new Error(`the message ended Failed: ${row.reason}`);
    if (Date.now() > deadline) throw new Error(`the send did not finish in time (status ${row?.status})`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function hopper(
  sink: Sink,
  n: number,
  workerCount: number,
  dkim?: 'rsa' | 'ed25519',
  role: 'worker' | 'all' = 'worker',
  without?: string,
): Promise<RunResult> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hopper-bench-'));
  const schema = `bench_${randomBytes(5).toString('hex')}`;
  const env = {
    DATABASE_URL,
    DATABASE_SCHEMA: schema,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    PUBLIC_URL: 'https://hopper.bench',
    MAIL_FROM: 'Hopper <no-reply@hopper.bench>',
    ...(dkim ? await dkimEnv(dataDir, dkim) : {}),
  };
  const config = loadConfig(env);
  const database = await openDatabase(config);
  const queue = await openJobQueue(database, config);
  const workers: Worker[] = [];
  try {
    const bootstrap = await bootstrapAdministrator(database.db, config);
    if (bootstrap.kind !== 'first-start') throw new Error('expected a fresh schema');
    const { messageId } = await seedBulkSend(database.db, bootstrap.userId, n);
    const warmUp = WARM_UP > 0 ? await seedBulkSend(database.db, bootstrap.userId, WARM_UP) : undefined;
    const workerEnv = {
      ...env,
      ROLE: role,
      // ROLE=all serves the API too, as `npm start` does: on a port of its own, default logging.
      ...(role === 'all' ? { PORT: String(await freePort()), HOST: '127.0.0.1', METRICS_TOKEN } : {}),
      LOG_LEVEL: 'info',
      SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
      SMTP_MAX_CONNECTIONS: String(CONNECTIONS),
    };
    for (let i = 0; i < workerCount; i++) workers.push(startWorker(workerEnv, i + 1, without));
    await Promise.all(workers.map((w) => w.ready));
    const before = await Promise.all(workers.map((w) => peakRssMb(w.child.pid!)));
    if (warmUp) {
      await scheduleNow(database.db, queue, warmUp.messageId);
      await untilSent(database.db, warmUp.messageId, WARM_UP);
    }
    await sink.reset();
    const sampler = role === 'all' ? memorySampler(workerEnv.PORT as string) : undefined;
    const meter = await sendMeter(sink, () => workers.map((w) => w.child.pid!));
    await scheduleNow(database.db, queue, messageId);
    const row = await untilSent(database.db, messageId, n);
    const cpu = await meter(n);
    const peaks = await Promise.all(workers.map((w) => peakRssMb(w.child.pid!)));
    if (sampler) console.log(`  memory at the highest RSS sampled: ${await sampler()}`);
    const seconds = (row.sent_at!.getTime() - row.sending_at!.getTime()) / 1000;

    const counted = await sql<{
      sent: string;
    }>`SELECT coalesce(sum(sent), 0) AS sent FROM message_counters WHERE message_id = ${messageId}`.execute(database.db);
    const sent = Number(counted.rows[0]?.sent);
    const { received, distinct, bytes } = await sink.count();
    if (sent !== n || distinct !== n) throw new Error(`counted sent ${sent}, sink distinct ${distinct}, expected ${n}`);
    return {
      label:
        role === 'all'
          ? `Hopper, npm start (ROLE=all)${without ? ` without ${without}` : ''}`
          : `Hopper, ${workerCount} worker${workerCount > 1 ? 's' : ''}${dkim ? `, DKIM ${dkim === 'rsa' ? 'RSA-2048' : 'Ed25519'}` : ''}`,
      rssBeforeMb: before,
      n,
      seconds,
      perSecond: n / seconds,
      peakRssMb: peaks,
      duplicates: received - distinct,
      cpu,
      bytes: bytes / received,
    };
  } finally {
    for (const w of workers) w.child.kill('SIGTERM');
    await Promise.all(workers.map((w) => w.exited));
    await queue.stop();
    await sql`DROP SCHEMA IF EXISTS ${sql.id(schema)} CASCADE`.execute(database.db);
    await sql`DROP SCHEMA IF EXISTS ${sql.id(`${schema}_pgboss`)} CASCADE`.execute(database.db);
    await database.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

const FLAG_TURNS = Number(process.env.BENCH_FLAG_TURNS ?? 3);

/**
 * What each setting of `npm start` (package.json's start script: a Node flag or a variable) costs
 * and saves: the ROLE=all send of ALL_CONTACTS with every setting and without that one, in
 * FLAG_TURNS turns (which goes first alternates); the throughput ratio (without ÷ with: above 1 means the setting costs) and the
 * peak RSS of each, medians of the turns.
 */
async function costOfEachSetting(sink: Sink): Promise<string[]> {
  const lines: string[] = [];
  const only = process.env.BENCH_FLAGS?.split(',');
  for (const setting of npmStartSettings().filter((name) => !only || only.includes(name))) {
    const ratios: number[] = [];
    const peaks: { with: number[]; without: number[] } = { with: [], without: [] };
    for (let turn = 0; turn < FLAG_TURNS; turn++) {
      // Which of the pair goes first alternates by turn: the machine's load drifts during a bench
      // (from 8 to 3 in one run of 2026-11-29), which favoured whichever always ran second.
      const pair = async (first: string | undefined, second: string | undefined) => {
        const a = await hopper(sink, ALL_CONTACTS, 1, undefined, 'all', first);
        const b = await hopper(sink, ALL_CONTACTS, 1, undefined, 'all', second);
        return first === undefined ? [a, b] : [b, a];
      };
      const [all, less] = (turn % 2 === 0 ? await pair(undefined, setting) : await pair(setting, undefined)) as [RunResult, RunResult];
      show(all);
      show(less);
      ratios.push(less.perSecond / all.perSecond);
      peaks.with.push(all.peakRssMb[0] ?? 0);
      peaks.without.push(less.peakRssMb[0] ?? 0);
    }
    lines.push(
      `  ${setting.padEnd(26)} send without ÷ with ${medianOf(ratios).toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(', ')}); ` +
        `peak RSS ${medianOf(peaks.with).toFixed(0)} MB with, ${medianOf(peaks.without).toFixed(0)} MB without`,
    );
  }
  return lines;
}

function show(result: RunResult): void {
  const before = result.rssBeforeMb?.length
    ? ` (${result.rssBeforeMb.map((mb) => `${mb.toFixed(0)} MB`).join(' + ')} before the send)`
    : '';
  const rss = result.peakRssMb.length ? `, peak RSS ${result.peakRssMb.map((mb) => `${mb.toFixed(0)} MB`).join(' + ')}${before}` : '';
  const { sender, sink, postgres } = result.cpu;
  console.log(
    `  ${result.label.padEnd(28)} ${String(result.n).padStart(7)} messages in ${result.seconds.toFixed(1)} s: ${result.perSecond.toFixed(0)}/s${rss}`,
  );
  console.log(
    `  ${''.padEnd(28)} CPU per message: sender ${sender} µs, sink ${sink} µs, postgres ${postgres} µs; ${result.bytes.toFixed(0)} bytes a message`,
  );
}

/** Turns of the `all` pair (BENCH_ALL_TURNS, 3): its verdicts are the median ratio and the highest peak. */
const ALL_TURNS = Number(process.env.BENCH_ALL_TURNS ?? 3);

/**
 * The `all-baseline` and `all` runs, ALL_TURNS turns of the pair, which of them goes first
 * alternating by turn (the machine's load drifts during a bench; the first of a pair otherwise
 * always gets it as the last run left it).
 */
async function sendInTurns(sink: Sink): Promise<{ ratios: number[]; peaks: number[]; duplicates: number; n: number }> {
  const ratios: number[] = [];
  const peaks: number[] = [];
  let duplicates = 0;
  for (let turn = 0; turn < ALL_TURNS; turn++) {
    const shown = (result: RunResult) => {
      show(result);
      return result;
    };
    let base: RunResult;
    let all: RunResult;
    if (turn % 2 === 0) {
      base = shown(await baseline(sink, ALL_CONTACTS));
      all = shown(await hopper(sink, ALL_CONTACTS, 1, undefined, 'all'));
    } else {
      all = shown(await hopper(sink, ALL_CONTACTS, 1, undefined, 'all'));
      base = shown(await baseline(sink, ALL_CONTACTS));
    }
    ratios.push(all.perSecond / base.perSecond);
    peaks.push(all.peakRssMb[0] ?? 0);
    duplicates += all.duplicates ?? 0;
  }
  return { ratios, peaks, duplicates, n: ALL_CONTACTS };
}

async function main(): Promise<void> {
  console.log(
    `bench:send — ${CONTACTS} contacts, ${CONNECTIONS} SMTP connections per process, ${DATABASE_URL.replace(/\/\/[^@]*@/, '//')}`,
  );
  console.log(`load average (1 min) at the start: ${loadavg()[0]!.toFixed(2)} on ${availableParallelism()} cores`);
  const sink = await startSink();
  const results: Record<string, RunResult> = {};
  let flagCosts: string[] = [];
  let allTurns: { ratios: number[]; peaks: number[]; duplicates: number; n: number } | undefined;
  try {
    const runs: [string, () => Promise<RunResult>][] = [
      ['baseline', () => baseline(sink, CONTACTS)],
      ['one', () => hopper(sink, CONTACTS, 1)],
      ['small', () => hopper(sink, SMALL, 1)],
      ['two', () => hopper(sink, CONTACTS, 2)],
      ['dkim', () => hopper(sink, CONTACTS, 1, 'rsa')],
      ['dkim-ed25519', () => hopper(sink, CONTACTS, 1, 'ed25519')],
    ];
    for (const [name, run] of runs) {
      if (!RUNS.has(name)) continue;
      results[name] = await run();
      show(results[name]);
    }
    if (RUNS.has('all') && RUNS.has('all-baseline')) allTurns = await sendInTurns(sink);
    else if (RUNS.has('all-baseline')) show(await baseline(sink, ALL_CONTACTS));
    else if (RUNS.has('all')) show(await hopper(sink, ALL_CONTACTS, 1, undefined, 'all'));
    if (RUNS.has('flags')) flagCosts = await costOfEachSetting(sink);
  } finally {
    sink.stop();
  }

  const { baseline: base, one, small, two, dkim, 'dkim-ed25519': ed } = results;
  const verdicts: [string, boolean][] = [];
  if (allTurns) {
    const { ratios, peaks, duplicates, n } = allTurns;
    const ratio = medianOf(ratios);
    verdicts.push([
      `npm start (ROLE=all) / baseline, ${n} recipients = ${ratio.toFixed(2)} (median of ${ratios.map((r) => r.toFixed(2)).join(', ')}; target ≥ 1.0)`,
      ratio >= 1.0,
    ]);
    verdicts.push([
      `npm start (ROLE=all) peak RSS through the send ≤ ${RSS_LIMIT_MB} MB in every turn (${peaks.map((p) => p.toFixed(0)).join(', ')} MB)`,
      Math.max(...peaks) <= RSS_LIMIT_MB,
    ]);
    verdicts.push([
      `npm start (ROLE=all): messages the sink received twice, over ${ratios.length} turns = ${duplicates} (target 0)`,
      duplicates === 0,
    ]);
  }
  if (base && one)
    verdicts.push([
      `one worker / baseline = ${(one.perSecond / base.perSecond).toFixed(2)} (target ≥ 0.8)`,
      one.perSecond / base.perSecond >= 0.8,
    ]);
  if (base && two)
    verdicts.push([
      `two workers / baseline = ${(two.perSecond / base.perSecond).toFixed(2)} (target > 1.0)`,
      two.perSecond / base.perSecond > 1.0,
    ]);
  for (const [signed, name] of [
    [dkim, 'RSA-2048'],
    [ed, 'Ed25519'],
  ] as const) {
    if (!signed) continue;
    if (one) console.log(`  DKIM ${name} / unsigned, one worker = ${(signed.perSecond / one.perSecond).toFixed(2)}`);
    if (base)
      verdicts.push([
        `one worker with DKIM ${name} / baseline = ${(signed.perSecond / base.perSecond).toFixed(2)} (target ≥ 0.8)`,
        signed.perSecond / base.perSecond >= 0.8,
      ]);
  }
  const peaks = [one, small, two].flatMap((r) => r?.peakRssMb ?? []);
  if (peaks.length)
    verdicts.push([
      `peak RSS per process ≤ ${RSS_LIMIT_MB} MB (max ${Math.max(...peaks).toFixed(0)} MB)`,
      Math.max(...peaks) <= RSS_LIMIT_MB,
    ]);
  if (one && small) {
    const [big, little] = [one.peakRssMb[0]!, small.peakRssMb[0]!];
    // Flat: ten times the recipients may cost at most 20 % (or 20 MB) more memory.
    verdicts.push([
      `peak RSS flat: ${little.toFixed(0)} MB at ${small.n} → ${big.toFixed(0)} MB at ${one.n}`,
      big <= Math.max(little * 1.2, little + 20),
    ]);
  }
  // Other work on the machine skews every figure: say how busy it was.
  console.log(`\nload average (1 min) at the end: ${loadavg()[0]!.toFixed(2)} on ${availableParallelism()} cores`);
  for (const [text, pass] of verdicts) console.log(`${pass ? 'PASS' : 'MISS'}  ${text}`);
  if (flagCosts.length)
    console.log(`\nwhat each setting of npm start costs and saves (${FLAG_TURNS} turns each, the median):\n${flagCosts.join('\n')}`);
}

const entry = process.argv[2] === '--baseline' ? baselineProcess(Number(process.argv[3]), Number(process.argv[4])) : main();
entry.catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
