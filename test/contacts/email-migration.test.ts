import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { btree_gin } from '@electric-sql/pglite/contrib/btree_gin';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import { Kysely, PGliteDialect, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { createContact, deleteContact, updateContact } from '../../src/contacts/contacts.ts';
import { readText } from '../../src/contacts/csv-file.ts';
import { importContacts, readCsv } from '../../src/contacts/import.ts';
import type { Db } from '../../src/db/database.ts';
import { MIGRATIONS, migrateTo, migrateToLatest } from '../../src/db/migrate.ts';
import { DomainError } from '../../src/errors.ts';

const BEFORE = '0020-text-search-short-pending-list';

/**
 * Migration 0021 on a database whose contacts already share addresses (made before it, when only a
 * look-up guarded creates): it succeeds, the oldest contact of each group holds the address, and
 * every later write keeps one live holder per address.
 */
describe('migration 0021 on contacts that already share addresses', () => {
  let db: Db;
  let close: () => Promise<void>;
  let schema = 'public';
  let userId: number;
  let otherUserId: number;
  let endpointUserId: number;
  const now = new Date('2026-11-26T09:00:00Z');

  before(async () => {
    // A database migrated up to 0020 only: PGlite in memory, or a schema of its own in DATABASE_URL.
    if (process.env.DATABASE_URL) {
      schema = `test_${randomBytes(6).toString('hex')}`;
      const pool = new pg.Pool({
        connectionString: process.env.DATABASE_URL,
        max: 4,
        options: `-c search_path=${schema}`,
        types: { getTypeParser: (oid: number, format: never) => (oid === 20 ? Number : pg.types.getTypeParser(oid, format)) },
      } as pg.PoolConfig);
      db = new Kysely({ dialect: new PostgresDialect({ pool }) });
      close = async () => {
        await sql`DROP SCHEMA ${sql.id(schema)} CASCADE`.execute(db);
        await db.destroy();
      };
    } else {
      const pglite = await PGlite.create({ parsers: { 20: Number }, extensions: { pg_trgm, btree_gin } });
      db = new Kysely({ dialect: new PGliteDialect({ pglite }) });
      close = () => db.destroy();
    }
    await sql`CREATE SCHEMA IF NOT EXISTS ${sql.id(schema)}`.execute(db);
    await migrateTo(db as unknown as Kysely<unknown>, schema, BEFORE);

    const user = async (email: string) =>
      Number(
        (
          await sql<{ id: number }>`
            INSERT INTO users (first_name, last_name, email, roles) VALUES ('Old', 'Data', ${email}, ARRAY['User']) RETURNING id`.execute(
            db,
          )
        ).rows[0]!.id,
      );
    userId = await user('old@example.test');
    otherUserId = await user('other@example.test');
    endpointUserId = await user('hooked@example.test');
    // Everything that migration 0021 must leave working, as the API used to let it be written.
    await sql`
      INSERT INTO contacts (user_id, first_name, email, phone, deleted_at) VALUES
        (${userId}, 'Dup 1', 'Dup@Example.test', NULL, NULL),
        (${userId}, 'Dup 2', 'dup@example.test', NULL, NULL),
        (${userId}, 'Gone', 'twice@example.test', NULL, ${now}),
        (${userId}, 'Dup 3', 'DUP@EXAMPLE.TEST', NULL, NULL),
        (${userId}, 'Twice', 'TWICE@example.test', NULL, NULL),
        (${userId}, 'Alone', 'alone@example.test', NULL, NULL),
        (${userId}, 'Phone 1', NULL, '7272329117', NULL),
        (${userId}, 'Phone 2', NULL, '7272329117', NULL),
        (${otherUserId}, 'Theirs', 'dup@example.test', NULL, NULL),
        (${endpointUserId}, 'Hooked 1', 'hooked@example.test', NULL, NULL),
        (${endpointUserId}, 'Hooked 2', 'Hooked@example.test', NULL, NULL)`.execute(db);
    await sql`
      INSERT INTO webhook_endpoints (user_id, url, events, secret)
      VALUES (${endpointUserId}, 'https://hooks.example.test/', ARRAY['contact.updated', 'contact.deleted'], 'secret')`.execute(db);
  });
  after(() => close());

  const idOf = async (firstName: string) =>
    Number((await db.selectFrom('contacts').select('id').where('first_name', '=', firstName).executeTakeFirstOrThrow()).id);
  const marked = async () =>
    (await db.selectFrom('contacts').select('first_name').where('duplicate_email', '=', true).orderBy('id').execute()).map(
      (row) => row.first_name,
    );
  /** Owners' live addresses held by more than one contact, each with its contacts' names. */
  const shared = async () =>
    (
      await sql<{ names: string[] }>`
        SELECT array_agg(first_name ORDER BY id) AS names FROM contacts
        WHERE deleted_at IS NULL AND email IS NOT NULL GROUP BY user_id, lower(email) HAVING count(*) > 1 ORDER BY min(id)`.execute(db)
    ).rows.map((row) => row.names);
  /** The 409 the write gets, naming the contact that holds the address. */
  async function assertRefused(write: () => Promise<unknown>, holder: number): Promise<void> {
    await assert.rejects(write, (error: unknown) => {
      assert.ok(error instanceof DomainError, String(error));
      assert.equal(error.code, 'conflict');
      assert.match(error.message, new RegExp(`^Contact ${holder} already has the email address `));
      assert.deepEqual(error.errors, { email: [`is already the email address of contact ${holder}`] });
      return true;
    });
  }
  const contact = async (firstName: string) =>
    db
      .selectFrom('contacts')
      .selectAll()
      .where('id', '=', await idOf(firstName))
      .executeTakeFirstOrThrow();

  test('the migration succeeds and marks all but the oldest contact of each shared address', async () => {
    assert.deepEqual(await shared(), [
      ['Dup 1', 'Dup 2', 'Dup 3'],
      ['Hooked 1', 'Hooked 2'],
    ]);
    // 0021, and whatever later migrations there are.
    const ran = await migrateToLatest(db as unknown as Kysely<unknown>, schema);
    assert.deepEqual(ran.slice(0, 1), ['0021-contact-email-unique']);
    assert.deepEqual(
      ran,
      Object.keys(MIGRATIONS).filter((name) => name >= '0021'),
    );
    assert.deepEqual(await marked(), ['Dup 2', 'Dup 3', 'Hooked 2']);
    // The data is as it was; marking a contact is no change of it for webhooks.
    assert.deepEqual(await shared(), [
      ['Dup 1', 'Dup 2', 'Dup 3'],
      ['Hooked 1', 'Hooked 2'],
    ]);
    const events = await sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_events`.execute(db);
    assert.equal(events.rows[0]!.n, 0);
  });

  test('later writes: the oldest holds the address, the next oldest takes it over, no new pair is ever made', async () => {
    const [dup1, dup2, dup3] = [await idOf('Dup 1'), await idOf('Dup 2'), await idOf('Dup 3')];
    await assertRefused(async () => createContact(db, userId, { email: 'dUP@example.test' }, now), dup1);
    await assertRefused(async () => createContact(db, userId, { email: 'dup@example.test', tags: ['Old'] }, now), dup1);
    await assertRefused(async () => updateContact(db, await contact('Alone'), { email: 'DUP@example.test' }, now), dup1);
    await assertRefused(async () => createContact(db, userId, { email: 'twice@EXAMPLE.test' }, now), await idOf('Twice'));
    // Another owner's contact with the address is theirs, and two contacts may share a phone number.
    await assertRefused(async () => createContact(db, otherUserId, { email: 'DUP@example.test' }, now), await idOf('Theirs'));
    await createContact(db, userId, { first_name: 'Phone 3', phone: '727-232-9117' }, now);

    // A marked contact may keep its address in any case, and change anything else.
    const recased = await updateContact(db, await contact('Dup 2'), { email: 'DUP@example.test', last_name: 'Two' }, now);
    assert.equal(recased?.email, 'DUP@example.test');
    assert.deepEqual(await marked(), ['Dup 2', 'Dup 3', 'Hooked 2']);

    // The holder leaves: the oldest marked contact with the address holds it.
    await deleteContact(db, await contact('Dup 1'), now);
    assert.deepEqual(await marked(), ['Dup 3', 'Hooked 2']);
    await assertRefused(async () => createContact(db, userId, { email: 'dup@example.test' }, now), dup2);

    // A marked contact that takes another address meets the index like any other contact.
    await assertRefused(async () => updateContact(db, await contact('Dup 3'), { email: 'alone@example.test' }, now), await idOf('Alone'));
    const moved = await updateContact(db, await contact('Dup 3'), { email: 'three@example.test' }, now);
    assert.equal(moved?.email, 'three@example.test');
    assert.deepEqual(await marked(), ['Hooked 2']);
    await assertRefused(async () => updateContact(db, await contact('Dup 3'), { email: 'Dup@example.test' }, now), dup2);

    // The import matches the holder and updates it.
    const csv = await readCsv(
      readText(Buffer.from('email,first_name\nDup@EXAMPLE.test,Dup 2 imported\nnew@example.test,New\n')),
      new Map(),
    );
    assert.deepEqual(await importContacts(db, userId, csv.rows, () => undefined, [], now), { created: 1, updated: 1, refused: [] });
    assert.equal(
      (await db.selectFrom('contacts').select('first_name').where('id', '=', dup2).executeTakeFirstOrThrow()).first_name,
      'Dup 2 imported',
    );

    // A holder that changes its address hands the old one over too.
    await updateContact(db, await contact('Hooked 1'), { email: 'elsewhere@example.test' }, now);
    assert.deepEqual(await marked(), []);
    assert.deepEqual(await shared(), []);
    await assertRefused(async () => createContact(db, endpointUserId, { email: 'hooked@example.test' }, now), await idOf('Hooked 2'));
    // Only the change a client made was announced: not the hand-over.
    const events = await sql<{ resource_id: number; type: string }>`
      SELECT resource_id, type FROM webhook_events ORDER BY id`.execute(db);
    assert.deepEqual(
      events.rows.map((e) => [Number(e.resource_id), e.type]),
      [[await idOf('Hooked 1'), 'contact.updated']],
    );

    // With every holder gone, the address is free again.
    await deleteContact(db, await contact('Dup 2 imported'), now);
    const fresh = await createContact(db, userId, { email: 'dup@example.test' }, now);
    assert.notEqual(fresh.id, dup3);
    assert.deepEqual(await shared(), []);
  });
});
