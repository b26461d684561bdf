import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { type App, type AppOptions, buildApp } from '../../src/app.ts';
import { type Config, loadConfig } from '../../src/config.ts';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import { bootstrapAdministrator } from '../../src/identity/bootstrap.ts';

/**
 * Every test file runs against a real database of its own: PGlite in a fresh directory by default,
 * or, when DATABASE_URL is set (CI's second pass), a fresh schema in that PostgreSQL database that
 * is dropped again on close.
 */
export interface TestApp {
  app: App;
  config: Config;
  database: DatabaseHandle;
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
}

export const usingPostgres = Boolean(process.env.DATABASE_URL);

export function testConfigEnv(dataDir: string, env: Record<string, string> = {}): Record<string, string> {
  const base: Record<string, string> = { DATA_DIR: dataDir, PUBLIC_URL: 'https://hopper.test', LOG_LEVEL: 'silent', PORT: '0' };
  if (process.env.DATABASE_URL) {
    base.DATABASE_URL = process.env.DATABASE_URL;
    base.DATABASE_SCHEMA = `test_${randomBytes(6).toString('hex')}`;
  }
  return { ...base, ...env };
}

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hopper-test-'));
  const config = loadConfig(testConfigEnv(dataDir, options.env));
  const database = await openDatabase(config);
  const bootstrap = await bootstrapAdministrator(database.db, config);
  if (bootstrap.kind !== 'first-start') throw new Error('expected a first start on a fresh database');
  const app = await buildApp(config, { database, clock: options.clock, logStream: options.logStream, https: options.https });
  await app.ready();
  return {
    app,
    config,
    database,
    dataDir,
    adminKey: bootstrap.key,
    adminId: bootstrap.userId,
    async close() {
      await app.close();
      if (config.databaseUrl) await sql`DROP SCHEMA ${sql.id(config.databaseSchema)} CASCADE`.execute(database.db);
      await database.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
