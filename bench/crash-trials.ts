import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { generateApiKey } from '../src/api-key-format.ts';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { openJobQueue } from '../src/db/job-queue.ts';
import { bootstrapAdministrator } from '../src/identity/bootstrap.ts';
import { scheduleNow, seedBulkSend } from '../test/sending/support/bulk-send.ts';
import { freePort, type HopperProcess, startHopper, stopHopper, untilSentThroughApi } from '../test/sending/support/hopper-process.ts';
import { startSmtpSink } from '../test/sending/support/smtp-sink.ts';
import { waitFor } from '../test/sending/support/wait.ts';
import { type PgCluster, startPgCluster } from '../test/support/pg-cluster.ts';
import { tools } from '../test/support/tools.ts';

/**
 * `npm run bench:crash`: SIGKILL trials of the sending engine, as issue 12 asks for them. On
 * PostgreSQL (DATABASE_URL, or a cluster of its own in a temporary directory when initdb is
 * installed), with the API (`ROLE=api`) and a worker (`ROLE=worker`) as separate `node src/main.ts`
 * processes and a real SMTP server on loopback counting every Message-ID: each trial sends one
 * templated email to CRASH_RECIPIENTS (3,000) contacts, kills the worker with SIGKILL somewhere
 * between 15 % and 75 % of the way, starts a new worker, and waits for the message to be Sent
 * (read through the API). Per trial it reports:
 *
 * - duplicates: Message-IDs the SMTP server received twice (goal: ≤ 2 × SMTP_MAX_CONNECTIONS, the hand-over slots);
 * - lost: deliveries recorded but never received, or contacts without a delivery (goal: 0);
 * - held: the claims the dead worker held (`sending`) when it died;
 * - take-over: seconds from the kill to the first re-sent held claim (goal: ≤ 15 s; SEND_LEASE).
 *
 * Environment: CRASH_TRIALS (10), CRASH_RECIPIENTS (3000), SMTP_MAX_CONNECTIONS (5), SEND_LEASE
 * (Hopper's default), DATABASE_URL.
 */
const TRIALS = Number(process.env.CRASH_TRIALS ?? 10);
const RECIPIENTS = Number(process.env.CRASH_RECIPIENTS ?? 3000);
const CONNECTIONS = process.env.SMTP_MAX_CONNECTIONS ?? '5';

interface Trial {
  killedAt: number;
  held: number;
  duplicates: number;
  lost: number;
  takeoverS: number | null;
  totalS: number;
}

async function main(): Promise<void> {
  let cluster: PgCluster | undefined;
  let url = process.env.DATABASE_URL;
  if (!url) {
    if (!tools.postgresServer.path) throw new Error('set DATABASE_URL, or install PostgreSQL (initdb) for a cluster of its own');
    cluster = await startPgCluster();
    url = cluster.url;
  }
  const dataDir = await mkdtemp(join(tmpdir(), 'hopper-crash-trials-'));
  const schema = `crash_${Date.now().toString(36)}`;
  const sink = await startSmtpSink();
  const adminKey = generateApiKey();
  const port = await freePort();
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    DATABASE_URL: url,
    DATABASE_SCHEMA: schema,
    PUBLIC_URL: 'https://hopper.test',
    PORT: String(port),
    HOST: '127.0.0.1',
    TRUST_PROXY: 'true',
    BOOTSTRAP_ADMIN_KEY: adminKey,
    SMTP_URL: sink.url,
    MAIL_FROM: 'Hopper <no-reply@hopper.test>',
    SMTP_MAX_CONNECTIONS: CONNECTIONS,
    LOG_LEVEL: 'info',
    ...(process.env.SEND_LEASE ? { SEND_LEASE: process.env.SEND_LEASE } : {}),
  };
  const config = loadConfig(env);
  const database = await openDatabase(config);
  const queue = await openJobQueue(database, config);
  const bootstrap = await bootstrapAdministrator(database.db, config);
  if (bootstrap.kind === 'none') throw new Error('no Administrator');
  const api = startHopper({ ...env, ROLE: 'api' });
  const processes: HopperProcess[] = [api];
  const trials: Trial[] = [];
  try {
    await waitFor('the API', async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok, { timeoutMs: 60_000 });
    console.log(
      `crash trials: ${TRIALS} × ${RECIPIENTS} recipients, SMTP_MAX_CONNECTIONS=${CONNECTIONS}, SEND_LEASE=${config.sendLeaseMs} ms, load ${loadavg()[0]!.toFixed(1)}`,
    );
    for (let trial = 1; trial <= TRIALS; trial++) {
      const { messageId } = await seedBulkSend(database.db, bootstrap.userId, RECIPIENTS);
      const ours = () => sink.messages.filter((m) => m.messageId.startsWith(`<templated_email-${messageId}.`));
      const worker = startHopper({ ...env, ROLE: 'worker' });
      processes.push(worker);
      await worker.ready(60_000);
      const started = Date.now();
      await scheduleNow(database.db, queue, messageId);
      const fraction = 0.15 + Math.random() * 0.6;
      await waitFor('the kill point', () => ours().length >= RECIPIENTS * fraction, { timeoutMs: 120_000, intervalMs: 5 });
      await stopHopper(worker, 'SIGKILL');
      const killedAt = Date.now();
      const killedAfter = ours().length;
      const heldRows = await database.db
        .selectFrom('deliveries')
        .select('id')
        .where('message_id', '=', messageId)
        .where('state', '=', 'sending')
        .execute();
      const held = new Set(heldRows.map((r) => r.id));

      const next = startHopper({ ...env, ROLE: 'worker' });
      processes.push(next);
      await untilSentThroughApi(`http://127.0.0.1:${port}`, adminKey, messageId, { timeoutMs: 300_000, intervalMs: 100 });
      const totalS = (Date.now() - started) / 1000;
      await stopHopper(next);

      const counts = new Map<string, number>();
      for (const m of ours()) counts.set(m.messageId, (counts.get(m.messageId) ?? 0) + 1);
      const deliveries = await database.db
        .selectFrom('deliveries')
        .select(['id', 'state', 'provider_message_id'])
        .where('message_id', '=', messageId)
        .execute();
      const lost =
        RECIPIENTS - deliveries.length + deliveries.filter((d) => d.state !== 'sent' || !counts.has(d.provider_message_id ?? '')).length;
      const duplicates = [...counts.values()].filter((n) => n > 1).length;
      const deliveryOf = (messageIdHeader: string) => Number(/\.(\d+)@/.exec(messageIdHeader)?.[1]);
      const firstRetaken = ours().find((m) => m.at > killedAt && held.has(deliveryOf(m.messageId)));
      const takeoverS = firstRetaken ? (firstRetaken.at - killedAt) / 1000 : null;
      trials.push({ killedAt: killedAfter, held: held.size, duplicates, lost, takeoverS, totalS });
      console.log(
        `trial ${String(trial).padStart(2)}: killed after ${String(killedAfter).padStart(4)} emails, held ${String(held.size).padStart(3)}, ` +
          `duplicates ${duplicates}, lost ${lost}, take-over ${takeoverS === null ? 'n/a (nothing held)' : `${takeoverS.toFixed(1)} s`}, send ${totalS.toFixed(1)} s`,
      );
    }
  } finally {
    await Promise.all(processes.map((p) => stopHopper(p)));
    await queue.stop();
    await sql`DROP SCHEMA IF EXISTS ${sql.id(schema)} CASCADE`.execute(database.db);
    await sql`DROP SCHEMA IF EXISTS ${sql.id(`${schema}_pgboss`)} CASCADE`.execute(database.db);
    await database.close();
    await sink.close();
    await cluster?.destroy();
    await rm(dataDir, { recursive: true, force: true });
  }
  const takeovers = trials.map((t) => t.takeoverS).filter((s): s is number => s !== null);
  console.log(
    `\nmax duplicates per crash: ${Math.max(...trials.map((t) => t.duplicates))} (goal ≤ ${2 * Number(CONNECTIONS)}); ` +
      `lost: ${trials.reduce((n, t) => n + t.lost, 0)}; max take-over: ${takeovers.length ? `${Math.max(...takeovers).toFixed(1)} s` : 'n/a'} (goal ≤ 15 s)`,
  );
}

await main();
