import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { type AppOptions, buildApp } from '../../src/app.ts';
import { type Config, loadConfig } from '../../src/config.ts';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import { type JobQueue, openJobQueue } from '../../src/db/job-queue.ts';
import type { App } from '../../src/http/fastify-types.ts';
import { bootstrapAdministrator } from '../../src/identity/bootstrap.ts';
import type { DNSResolver } from '../../src/inbound/authentication.ts';
import { createLogger } from '../../src/log.ts';
import { systemClock } from '../../src/time.ts';
import { startWorkers, type Workers } from '../../src/workers.ts';
import { seedPgliteDataDir } from './pglite-template.ts';
import { createTestDatabase } from './postgres-template.ts';

/**
 * Every test file runs against a real database of its own: PGlite in a fresh directory by default,
 * or, when DATABASE_URL is set (CI's second pass), a fresh schema in that PostgreSQL database that
 * is dropped again on close.
 */
export interface TestApp {
  app: App;
  config: Config;
  database: DatabaseHandle;
  queue: JobQueue;
  /** The sending engine, when the test asked for workers. */
  workers: Workers | undefined;
  dataDir: string;
  /** The first-start Administrator's key. */
  adminKey: string;
  adminId: number;
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  clock?: AppOptions['clock'];
  logStream?: AppOptions['logStream'];
  https?: AppOptions['https'];
  /** Start the sending engine too (ROLE=all), as `npm start` does. */
  workers?: boolean;
  /** How the SES webhook fetches SNS certificates and subscription URLs. */
  snsFetch?: AppOptions['snsFetch'];
  /** How the inbound receiver's SPF, DKIM and DMARC checks ask the DNS (test/inbound/dns.ts answers offline). */
  dnsResolver?: DNSResolver;
}

export const usingPostgres = Boolean(process.env.DATABASE_URL);

export function testConfigEnv(dataDir: string, env: Record<string, string> = {}): Record<string, string> {
  // A generous DATABASE_TIMEOUT: a loaded test machine must not turn a slow statement into a 503.
  // test/db/outage.test.ts runs Hopper with the default.
  // The suite makes thousands of requests a minute with one key: the rate limit is raised for it
  // (test/http/rate-limit.test.ts sets the default of 600 back and checks it).
  const base: Record<string, string> = {
    DATA_DIR: dataDir,
    PUBLIC_URL: 'https://hopper.test',
    // With SMTP_URL set, Hopper refuses to start while MAIL_FROM is at localhost (its default).
    MAIL_FROM: 'Hopper <no-reply@hopper.test>',
    LOG_LEVEL: 'silent',
    PORT: '0',
    DATABASE_TIMEOUT: '10s',
    RATE_LIMIT: '1000000',
  };
  if (process.env.DATABASE_URL) {
    base.DATABASE_URL = process.env.DATABASE_URL;
    base.DATABASE_SCHEMA = `test_${randomBytes(6).toString('hex')}`;
  }
  return { ...base, ...env };
}

/** Drops a test's schemas over a connection of its own, so it works even after the app's database was closed. */
async function dropSchemas(url: string, schemas: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hopper-test-'));
  // The database is a copy of a template whose first-start Administrator is made already
  // (pglite-template.ts, postgres-template.ts), unless the test has a clock of its own: then it
  // starts from the migrated database and makes its Administrator at that clock's time, as
  // Hopper's first start would.
  const ownClock = options.clock !== undefined;
  const postgres = process.env.DATABASE_URL && !ownClock ? await createTestDatabase(process.env.DATABASE_URL) : undefined;
  const config = loadConfig(
    testConfigEnv(dataDir, { ...(postgres ? { DATABASE_URL: postgres.url, DATABASE_SCHEMA: postgres.schema } : {}), ...options.env }),
  );
  let admin = postgres?.admin;
  if (!config.databaseUrl) admin = ownClock ? await seedPgliteDataDir(dataDir) : await seedPgliteDataDir(dataDir, { admin: true });
  const database = await openDatabase(config);
  const queue = await openJobQueue(database, config);
  if (!admin) {
    const bootstrap = await bootstrapAdministrator(database.db, config, options.clock ?? systemClock);
    if (bootstrap.kind !== 'first-start') throw new Error('expected a first start on a fresh database');
    admin = { adminKey: bootstrap.key, adminId: bootstrap.userId };
  }
  const logger = createLogger(config, options.logStream);
  const clock = options.clock ?? systemClock;
  const workers = options.workers
    ? await startWorkers({
        database,
        config,
        queue,
        clock,
        log: logger,
        ...(options.dnsResolver ? { dnsResolver: options.dnsResolver } : {}),
      })
    : undefined;
  const app = await buildApp(config, {
    database,
    queue,
    clock,
    logger,
    https: options.https,
    snsFetch: options.snsFetch,
    checkResponses: true,
  });
  await app.ready();
  return {
    app,
    config,
    database,
    queue,
    workers,
    dataDir,
    ...admin,
    async close() {
      await app.close();
      await workers?.stop();
      await queue.stop();
      await database.close();
      if (postgres) await postgres.drop();
      else if (config.databaseUrl) await dropSchemas(config.databaseUrl, [config.databaseSchema, `${config.databaseSchema}_pgboss`]);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
