import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { openJobQueue } from '../../src/db/job-queue.ts';
import { templateKey } from './pglite-template.ts';
import { bootstrapTemplateAdmin, type TemplateAdmin } from './template-admin.ts';

/**
 * On PostgreSQL (DATABASE_URL), a test app's database is a copy of a migrated template database:
 * `CREATE DATABASE … TEMPLATE` copies it in about 50 ms of the server's CPU, where running every
 * migration and pg-boss's schema in a new schema costs the server about 650 ms and the test
 * process 300 ms more — for each of the few hundred apps a run of the suite starts. The template,
 * with its first-start Administrator made (template-admin.ts), is built once by the first test
 * process that needs it, under an advisory lock, with the real `openDatabase` and
 * `openJobQueue`, and named by the same hash of what shapes it as PGlite's template
 * (pglite-template.ts). Every database is named after DATABASE_URL's own (`<name>__…`), so that
 * `npm test` drops what a run left behind (dropTestDatabases) and nothing else.
 */
const SCHEMA = 'hopper_test';

export interface TestDatabase {
  url: string;
  schema: string;
  admin: TemplateAdmin;
  drop(): Promise<void>;
}

/** The prefix of every database made for the tests on DATABASE_URL's server. */
export function testDatabasePrefix(url: string): string {
  return `${new URL(url).pathname.slice(1).slice(0, 40)}__`;
}

function withDatabase(url: string, name: string): string {
  const copy = new URL(url);
  copy.pathname = `/${name}`;
  return copy.toString();
}

async function onServer<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function comment(client: pg.Client, name: string): Promise<string | undefined> {
  const { rows } = await client.query(`SELECT shobj_description(oid, 'pg_database') AS c FROM pg_database WHERE datname = $1`, [name]);
  return rows[0]?.c ?? undefined;
}

async function buildTemplate(client: pg.Client, url: string, name: string): Promise<void> {
  const building = `${name}_b`;
  await client.query(`DROP DATABASE IF EXISTS "${building}" WITH (FORCE)`);
  await client.query(`CREATE DATABASE "${building}"`);
  const config = loadConfig({
    DATA_DIR: tmpdir(),
    PUBLIC_URL: 'https://hopper.test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: withDatabase(url, building),
    DATABASE_SCHEMA: SCHEMA,
  });
  const database = await openDatabase(config);
  const queue = await openJobQueue(database, config);
  const admin = await bootstrapTemplateAdmin(database.db, config);
  await queue.stop();
  await database.close();
  await client.query(`COMMENT ON DATABASE "${building}" IS ${client.escapeLiteral(JSON.stringify(admin))}`);
  // Published by its name last, so that a build that fails half way is never taken for a template.
  await client.query(`ALTER DATABASE "${building}" RENAME TO "${name}"`);
}

async function ensureTemplate(url: string): Promise<{ name: string; admin: TemplateAdmin }> {
  const name = `${testDatabasePrefix(url)}tpl_${(await templateKey()).slice(0, 12)}`;
  return onServer(url, async (client) => {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
    if ((await comment(client, name)) === undefined) await buildTemplate(client, url, name);
    return { name, admin: JSON.parse((await comment(client, name)) as string) as TemplateAdmin };
  });
}

const templates = new Map<string, Promise<{ name: string; admin: TemplateAdmin }>>();

/** A new database on DATABASE_URL's server, a copy of the template, and how to drop it again. */
export async function createTestDatabase(url: string): Promise<TestDatabase> {
  let template = templates.get(url);
  if (!template) {
    template = ensureTemplate(url);
    templates.set(url, template);
  }
  const { name: templateName, admin } = await template;
  const name = `${testDatabasePrefix(url)}${randomBytes(6).toString('hex')}`;
  await onServer(url, (client) => client.query(`CREATE DATABASE "${name}" TEMPLATE "${templateName}"`));
  return {
    url: withDatabase(url, name),
    schema: SCHEMA,
    admin,
    drop: () => onServer(url, (client) => client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined),
  };
}

/** Drops every database the tests made on DATABASE_URL's server, the templates too (scripts/test.ts, at the end of a run). */
export async function dropTestDatabases(url: string): Promise<void> {
  await onServer(url, async (client) => {
    const prefix = testDatabasePrefix(url).replace(/[\\%_]/g, '\\$&');
    const { rows } = await client.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE $1`, [`${prefix}%`]);
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  });
}
