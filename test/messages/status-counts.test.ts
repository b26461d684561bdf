import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { btree_gin } from '@electric-sql/pglite/contrib/btree_gin';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import { Kysely, PGliteDialect, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Db } from '../../src/db/database.ts';
import { migrateTo, migrateToLatest } from '../../src/db/migrate.ts';
import { MESSAGE_TABLES } from '../../src/messages/kinds.ts';
import { MESSAGE_STATUSES } from '../../src/messages/lifecycle.ts';
import { countMessagesByStatus } from '../../src/messages/message-tables.ts';
import { asKey } from '../support/client.ts';
import { createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { createMessage, DROPS, EMAILS } from './fixtures.ts';

const TABLES = ['voicemail_drops', 'templated_emails'] as const;

/** Each owner's live messages by status, as `collection_versions` keeps them: `table user status` → n. */
async function keptCounts(db: Db): Promise<Record<string, number>> {
  const { rows } = await sql<Record<string, string | number>>`
    SELECT collection, user_id, ${sql.join(MESSAGE_STATUSES.map((s) => sql`sum(${sql.ref(s.toLowerCase())}) AS ${sql.id(s)}`))}
    FROM collection_versions GROUP BY collection, user_id`.execute(db);
  const counts: Record<string, number> = {};
  for (const row of rows) {
    for (const status of MESSAGE_STATUSES) {
      const n = Number(row[status]);
      if (n !== 0) counts[`${row.collection} ${row.user_id} ${status}`] = n;
    }
  }
  return counts;
}

/** The same, counted from the rows. */
async function actualCounts(db: Db): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of TABLES) {
    const { rows } = await sql<{ user_id: number; status: string; n: string }>`
      SELECT user_id, status, count(*) AS n FROM ${sql.table(table)} WHERE deleted_at IS NULL GROUP BY user_id, status`.execute(db);
    for (const row of rows) counts[`${table} ${row.user_id} ${row.status}`] = Number(row.n);
  }
  return counts;
}

/**
 * Migration 0036: each owner's live messages by status, kept by the trigger that keeps the
 * collection's version, so that a search's `status=…` part of the exact total and `/metrics`'s
 * `hopper_messages` are read, not counted.
 */
describe('status counts kept by the database', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('they equal the rows after every kind of change, made through the API or in SQL', async () => {
    const db = t.database.db;
    const [a, b] = [await createUser(t, 'User'), await createUser(t, 'User')];
    const check = async (step: string) => {
      const actual = await actualCounts(db);
      assert.deepEqual(await keptCounts(db), actual, step);
      // `/metrics` reads them too: every kind and status, summed over the owners.
      const byKind: Record<string, number> = {};
      for (const [key, n] of Object.entries(actual)) {
        const [table, , status] = key.split(' ');
        byKind[`${table} ${status}`] = (byKind[`${table} ${status}`] ?? 0) + n;
      }
      const metrics = await countMessagesByStatus(db);
      assert.equal(metrics.length, 2 * MESSAGE_STATUSES.length, step);
      for (const { kind, status, n } of metrics)
        assert.equal(n, byKind[`${MESSAGE_TABLES[kind]} ${status}`] ?? 0, `${step}: ${kind} ${status}`);
    };
    const drops: number[] = [];
    for (let i = 0; i < 4; i++) drops.push((await createMessage(t, DROPS, a, { name: `Drop ${i}` })).id);
    const email = (await createMessage(t, EMAILS, a)).id;
    await createMessage(t, EMAILS, b);
    await check('creates through the API');

    const client = asKey(t.app, a.key);
    assert.equal((await client.put(`/v3/voicemail_drops/${drops[0]}`, { status: 'Scheduled' })).status, 200);
    assert.equal((await client.delete(`/v3/voicemail_drops/${drops[1]}`)).status, 200);
    assert.equal((await client.delete(`/v3/templated_emails/${email}`)).status, 200);
    await check('a status change and soft deletes through the API');

    // What the sending engine, an import or an operator does in SQL: many rows per statement.
    await sql`
      INSERT INTO voicemail_drops (user_id, provider, media_id, callback_number, name, status)
      SELECT ${b.id}, provider, media_id, callback_number, 'Copy ' || n, (ARRAY['Saved', 'Sent', 'Failed'])[1 + n % 3]
      FROM voicemail_drops, generate_series(1, 30) n WHERE id = ${drops[2]}`.execute(db);
    await check('a many-row insert');
    await sql`UPDATE voicemail_drops SET status = 'Cancelled' WHERE user_id = ${b.id} AND status = 'Failed'`.execute(db);
    await check('a many-row status change');
    await sql`UPDATE voicemail_drops SET deleted_at = now() WHERE user_id = ${b.id} AND name LIKE 'Copy 1%'`.execute(db);
    await sql`UPDATE voicemail_drops SET deleted_at = NULL, status = 'Sending' WHERE id = ${drops[1]}`.execute(db);
    await check('soft deletes and an undelete with a new status');
    await sql`UPDATE voicemail_drops SET user_id = ${b.id}, status = 'Sent' WHERE id = ${drops[3]}`.execute(db);
    await sql`UPDATE voicemail_drops SET user_id = ${a.id} WHERE user_id = ${b.id} AND name LIKE 'Copy 2%' AND deleted_at IS NULL`.execute(
      db,
    );
    await check('moves between owners');
    await sql`DELETE FROM voicemail_drops WHERE user_id = ${b.id} AND name LIKE 'Copy 3%'`.execute(db);
    await sql`DELETE FROM voicemail_drops WHERE deleted_at IS NOT NULL AND user_id = ${b.id}`.execute(db);
    await check('hard deletes of live and of deleted rows');
    // Sessions of their own bump shards of their own (PostgreSQL: one connection each).
    await Promise.all(
      ['Saved', 'Sent', 'Failed', 'Scheduled'].map((status, i) =>
        sql`UPDATE voicemail_drops SET status = ${status} WHERE user_id = ${b.id} AND id % 4 = ${i}`.execute(db),
      ),
    );
    await check('changes from several sessions at once');
  });

  test('a search by status reads the count: a change since the last search costs no statement of its own', async () => {
    const owner = await createUser(t, 'User');
    const client = asKey(t.app, owner.key);
    for (let i = 0; i < 5; i++) await createMessage(t, DROPS, owner, { name: `House ${i}` });
    const base = `/v3/users/${owner.id}/voicemail_drops`;
    const search = async (query: string) => {
      const before = t.database.queryCount();
      const reply = await client.get(`${base}?${query}`);
      assert.equal(reply.status, 200, reply.raw);
      return { total: reply.body.meta.total as number, statements: t.database.queryCount() - before };
    };
    assert.equal((await search('status=Saved&per_page=2')).total, 5);
    const unchanged = await search('status=Saved&per_page=2');
    await createMessage(t, DROPS, owner, { name: 'House 5' });
    const changed = await search('status=Saved&per_page=2');
    assert.deepEqual(changed, { total: 6, statements: unchanged.statements }, 'the changed count is read with the page');

    // Repeated and mixed status terms, with a text term after them: the total is the rows there are.
    const [made] = (await client.get(`${base}?per_page=1`)).body.data;
    await sql`UPDATE voicemail_drops SET status = 'Sent' WHERE id = ${made.id}`.execute(t.database.db);
    for (const query of [
      'status=Saved&status=Saved',
      'status=Sent&status=Saved&name=house',
      'status=Sent&name=5&status=Sent',
      'name=house&status=Failed',
    ]) {
      const all = await client.get(`${base}?${query}&per_page=100`);
      const counted = await client.get(`${base}?${query}&per_page=1`);
      assert.ok(all.body.data.length > 1, `${query} is a meaningful case`);
      assert.equal(counted.body.meta.total, all.body.data.length, query);
    }
  });
});

describe('migration 0036 on messages that already exist', () => {
  let db: Db;
  let close: () => Promise<void>;
  let schema = 'public';

  before(async () => {
    // A database migrated up to 0035 only: PGlite in memory, or a schema of its own in DATABASE_URL.
    if (process.env.DATABASE_URL) {
      schema = `test_${randomBytes(6).toString('hex')}`;
      const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2, options: `-c search_path=${schema}` });
      db = new Kysely({ dialect: new PostgresDialect({ pool }) });
      close = async () => {
        await sql`DROP SCHEMA ${sql.id(schema)} CASCADE`.execute(db);
        await db.destroy();
      };
    } else {
      const pglite = await PGlite.create({ extensions: { pg_trgm, btree_gin } });
      db = new Kysely({ dialect: new PGliteDialect({ pglite }) });
      close = () => db.destroy();
    }
    await sql`CREATE SCHEMA IF NOT EXISTS ${sql.id(schema)}`.execute(db);
    await migrateTo(db as unknown as Kysely<unknown>, schema, '0035-inlinable-webhook-endpoints');
  });
  after(() => close());

  test('every owner starts with the counts of its rows, and changes keep them', async () => {
    const owners: number[] = [];
    for (const email of ['one@example.test', 'two@example.test']) {
      const { rows } = await sql<{ id: string }>`
        INSERT INTO users (first_name, last_name, email, roles) VALUES ('Old', 'Data', ${email}, ARRAY['User']) RETURNING id`.execute(db);
      owners.push(Number(rows[0]?.id));
    }
    const { rows } = await sql<{ id: string }>`
      INSERT INTO media (user_id, name, file_name, collection_name, mime_type, size, token, storage_key)
      VALUES (${owners[0]}, 'Hello', 'hello.wav', 'audio', 'audio/wav', 10, 'token', 'key') RETURNING id`.execute(db);
    const media = Number(rows[0]?.id);
    for (const [i, owner] of owners.entries()) {
      await sql`
        INSERT INTO voicemail_drops (user_id, provider, media_id, callback_number, name, deleted_at)
        SELECT ${owner}, 'Sandbox', ${media}, '7272329117', 'Drop ' || n, CASE WHEN n % 7 = 0 THEN now() END
        FROM generate_series(1, ${20 + 10 * i}) n`.execute(db);
      await sql`
        INSERT INTO templated_emails (user_id, subject, greeting_with_first_name, greeting_without_first_name, body, text, status)
        SELECT ${owner}, 'Hi ' || n, 'Hi', 'Hello', '<p>x</p>', 'x', CASE WHEN n % 2 = 0 THEN 'Sent' ELSE 'Saved' END
        FROM generate_series(1, ${5 + i}) n`.execute(db);
    }
    await sql`UPDATE voicemail_drops SET status = (${`{${MESSAGE_STATUSES.join(',')}}`}::text[])[1 + id % 6]`.execute(db);
    await migrateToLatest(db as unknown as Kysely<unknown>, schema);
    const expected = await actualCounts(db);
    assert.ok(Object.keys(expected).length >= 10, 'a meaningful case');
    assert.deepEqual(await keptCounts(db), expected);

    await sql`UPDATE voicemail_drops SET status = 'Saved', deleted_at = NULL WHERE user_id = ${owners[1]} AND id % 3 = 0`.execute(db);
    await sql`DELETE FROM templated_emails WHERE status = 'Sent'`.execute(db);
    assert.deepEqual(await keptCounts(db), await actualCounts(db), 'changes after the migration');
  });
});
