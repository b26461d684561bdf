import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import nodemailer from 'nodemailer';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { loadTrackingTokens } from '../src/email/tokens.ts';
import { bootstrapAdministrator } from '../src/identity/bootstrap.ts';
import { seedBulkSend } from '../test/sending/support/bulk-send.ts';
import { freePort } from '../test/support/free-port.ts';
import { cpuSeconds } from './cpu.ts';
import { type Sink, startSink } from './sink.ts';

/**
 * `npm run bench:inbound`: BENCH_MESSAGES (10,000) messages over SMTP into the inbound receiver of
 * one Hopper worker process (`ROLE=worker node src/main.ts`, INBOUND_DOMAIN set) on PostgreSQL —
 * half of them replies to `r-TOKEN@` addresses (each stored, counted, forwarded through the relay),
 * half DSN 5.1.1 bounces to `b-TOKEN@` (each a hard bounce retiring its contact) — sent from this
 * process by nodemailer over BENCH_CONNECTIONS (20) connections. Baseline: the same messages into
 * a plain SMTP sink that only counts them, in the same run. Every counter is checked afterwards.
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_MESSAGES,
 * BENCH_CONNECTIONS, BENCH_VERBOSE=1 (show the worker's output).
 */
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 10_000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const MAIN = join(import.meta.dirname, '..', 'src', 'main.ts');
const DOMAIN = 'in.hopper.bench';
const TARGET = 500;

interface Mail {
  envelope: { from: string; to: string };
  raw: string;
}

function reply(i: number, contact: string, to: string): Mail {
  return {
    envelope: { from: contact, to },
    raw: [
      `From: Contact ${i} <${contact}>`,
      `To: Jane Agent <${to}>`,
      'Subject: Re: New listings for you',
      `Message-ID: <reply-${i}@mail.example>`,
      `Date: ${new Date().toUTCString()}`,
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      `Thanks! Could we talk on Thursday about the house on Elm Street? (${i})`,
      '',
      '> We have a few new listings near you this week.',
      '',
    ].join('\r\n'),
  };
}

function bounce(i: number, recipient: string, to: string): Mail {
  return {
    envelope: { from: '', to },
    raw: [
      'From: Mail Delivery System <MAILER-DAEMON@mx.example.net>',
      `To: ${to}`,
      'Subject: Undelivered Mail Returned to Sender',
      `Message-ID: <dsn-${i}@mx.example.net>`,
      'Auto-Submitted: auto-replied',
      'MIME-Version: 1.0',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="b"',
      '',
      '--b',
      'Content-Type: text/plain',
      '',
      `Your message to <${recipient}> could not be delivered.`,
      '--b',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.example.net',
      '',
      `Final-Recipient: rfc822; ${recipient}`,
      'Action: failed',
      'Status: 5.1.1',
      'Diagnostic-Code: smtp; 550 5.1.1 user unknown',
      '--b--',
      '',
    ].join('\r\n'),
  };
}

/** Sends every mail over `CONNECTIONS` pooled connections; seconds taken. */
async function blast(port: number, mails: Mail[], tls: boolean): Promise<number> {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: !tls,
    tls: { rejectUnauthorized: false },
    pool: true,
    maxConnections: CONNECTIONS,
    maxMessages: Number.POSITIVE_INFINITY,
  } as never);
  const started = performance.now();
  let next = 0;
  const lane = async () => {
    while (next < mails.length) await transport.sendMail(mails[next++]!);
  };
  await Promise.all(Array.from({ length: CONNECTIONS * 2 }, lane));
  const seconds = (performance.now() - started) / 1000;
  transport.close();
  return seconds;
}

function startWorker(env: Record<string, string>): { child: ChildProcess; ready: Promise<void>; exited: Promise<void> } {
  const child = spawn(process.execPath, [MAIN], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk;
      if (process.env.BENCH_VERBOSE) process.stdout.write(`[worker] ${chunk}`);
      if (output.includes('inbound mail receiver listening')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`the worker exited (${code}):\n${output}`)));
  });
  child.stderr?.on('data', (chunk: Buffer) => process.stderr.write(`[worker] ${chunk}`));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, ready, exited };
}

async function main(): Promise<void> {
  console.log(`bench:inbound — ${MESSAGES} messages, ${CONNECTIONS} connections, ${DATABASE_URL.replace(/\/\/[^@]*@/, '//')}`);
  console.log(`load average (1 min) at the start: ${loadavg()[0]!.toFixed(2)} on ${availableParallelism()} cores`);
  const sink: Sink = await startSink();
  const dataDir = await mkdtemp(join(tmpdir(), 'hopper-bench-inbound-'));
  const schema = `bench_${randomBytes(5).toString('hex')}`;
  const port = await freePort();
  const env = {
    DATABASE_URL,
    DATABASE_SCHEMA: schema,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    PUBLIC_URL: 'https://hopper.bench',
    MAIL_FROM: 'Hopper <no-reply@hopper.bench>',
    INBOUND_DOMAIN: DOMAIN,
    INBOUND_SMTP_HOST: '127.0.0.1',
    INBOUND_SMTP_PORT: String(port),
    SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
  };
  const config = loadConfig(env);
  const database = await openDatabase(config);
  let worker: ReturnType<typeof startWorker> | undefined;
  try {
    const bootstrap = await bootstrapAdministrator(database.db, config);
    if (bootstrap.kind !== 'first-start') throw new Error('expected a fresh schema');
    const { messageId } = await seedBulkSend(database.db, bootstrap.userId, MESSAGES);
    // One delivery per contact, as the engine leaves them once handed over.
    await sql`
      INSERT INTO deliveries (user_id, message_kind, message_id, contact_id, address, state, next_attempt_at, created_at, updated_at, sent_at)
      SELECT c.user_id, 'templated_email', ${messageId}, c.id, c.email, 'sent', now(), now(), now(), now()
      FROM contacts c WHERE c.user_id = ${bootstrap.userId} ORDER BY c.id`.execute(database.db);
    const deliveries = await database.db.selectFrom('deliveries').select(['id', 'address']).orderBy('id').execute();
    const tokens = await loadTrackingTokens(database.db);
    const mails = deliveries.map((d, i) =>
      i % 2 === 0
        ? reply(i, d.address, `r-${tokens.signForAddress('reply', d.id)}@${DOMAIN}`)
        : bounce(i, d.address, `b-${tokens.signForAddress('bounce', d.id)}@${DOMAIN}`),
    );
    const replies = Math.ceil(MESSAGES / 2);
    const bounces = MESSAGES - replies;

    await sink.reset();
    const baseSeconds = await blast(sink.port, mails, false);
    const baseRate = MESSAGES / baseSeconds;
    console.log(`  plain SMTP sink (baseline)   ${MESSAGES} messages in ${baseSeconds.toFixed(1)} s: ${baseRate.toFixed(0)}/s`);
    await sink.reset();

    worker = startWorker({ ...env, ROLE: 'worker' });
    await worker.ready;
    const cpuBefore = await cpuSeconds(worker.child.pid!);
    const seconds = await blast(port, mails, true);
    const cpu = (await cpuSeconds(worker.child.pid!)) - cpuBefore;
    const rate = MESSAGES / seconds;
    console.log(`  Hopper receiver, 1 worker    ${MESSAGES} messages in ${seconds.toFixed(1)} s: ${rate.toFixed(0)}/s (STARTTLS)`);
    console.log(
      `  ${''.padEnd(28)} worker CPU per message: ${Math.round((cpu * 1e6) / MESSAGES)} µs (${(MESSAGES / cpu).toFixed(0)} messages per CPU-second)`,
    );

    const counted = await sql<{ reply: string; bounce: string; hard_bounce: string; soft_bounce: string }>`
      SELECT coalesce(sum(reply), 0) AS reply, coalesce(sum(bounce), 0) AS bounce,
             coalesce(sum(hard_bounce), 0) AS hard_bounce, coalesce(sum(soft_bounce), 0) AS soft_bounce
      FROM message_counters WHERE message_id = ${messageId}`.execute(database.db);
    const c = counted.rows[0]!;
    const stored = await sql<{ n: string }>`SELECT count(*) AS n FROM replies`.execute(database.db);
    const retired = await sql<{ n: string }>`SELECT count(*) AS n FROM contacts WHERE status = 'Inactive - Hard Bounce'`.execute(
      database.db,
    );
    // Forwards leave while each reply's SMTP exchange is still open: all are in the sink by now.
    const { received } = await sink.count();
    const checks: [string, number, number][] = [
      ['reply counter', Number(c.reply), replies],
      ['replies stored', Number(stored.rows[0]!.n), replies],
      ['forwards received by the relay', received, replies],
      ['bounce counter', Number(c.bounce), bounces],
      ['hard_bounce counter', Number(c.hard_bounce), bounces],
      ['soft_bounce counter', Number(c.soft_bounce), 0],
      ['contacts retired (hard bounce)', Number(retired.rows[0]!.n), bounces],
    ];
    console.log(`\nload average (1 min) at the end: ${loadavg()[0]!.toFixed(2)} on ${availableParallelism()} cores`);
    let ok = true;
    for (const [what, got, want] of checks) {
      console.log(`${got === want ? 'PASS' : 'FAIL'}  ${what}: ${got} (expected ${want})`);
      ok &&= got === want;
    }
    console.log(
      `${rate >= TARGET ? 'PASS' : 'MISS'}  ${rate.toFixed(0)} messages/s on one worker (target ≥ ${TARGET}); Hopper / plain sink = ${(rate / baseRate).toFixed(2)}`,
    );
    if (!ok) process.exitCode = 1;
  } finally {
    if (worker) {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    sink.stop();
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
