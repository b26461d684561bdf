import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { btree_gin } from '@electric-sql/pglite/contrib/btree_gin';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import { Kysely, PGliteDialect, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { createContact, updateContact } from '../../src/contacts/contacts.ts';
import type { Db } from '../../src/db/database.ts';
import { migrateTo, migrateToLatest } from '../../src/db/migrate.ts';
import { DomainError } from '../../src/errors.ts';

const BEFORE = '0038-webhook-maker-rights';

/**
 * Migration 0039 on contacts written before it, when an owner could re-subscribe a person who
 * said no by deleting and re-creating the contact (issue 36, finding 4): every address with the
 * person's word is recorded, a live contact re-created onto one takes it back, and what the owner
 * set stays the owner's to undo.
 */
describe('migration 0039 on contacts that were re-created over the person’s word', () => {
  let db: Db;
  let close: () => Promise<void>;
  let schema = 'public';
  let userId: number;
  let otherUserId: number;
  const now = new Date('2026-11-26T09:00:00Z');
  const theirs = { reason: 'unsubscribed', at: '2026-11-20T10:00:00Z', delivery_id: 41, description: null };
  const owners = { reason: 'unsubscribed', at: '2026-11-20T10:00:00Z', delivery_id: null, description: 'Set by the owner' };

  before(async () => {
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
    await sql`
      INSERT INTO contacts (user_id, first_name, email, status, email_suppression, deleted_at) VALUES
        (${userId}, 'Said no', 'gone@example.test', 'Unsubscribed', ${JSON.stringify(theirs)}::jsonb, ${now}),
        (${userId}, 'Re-created', 'GONE@example.test', 'Subscribed', NULL, NULL),
        (${userId}, 'Owner set', 'owner@example.test', 'Unsubscribed', ${JSON.stringify(owners)}::jsonb, ${now}),
        (${userId}, 'Owner re-created', 'owner@example.test', 'Subscribed', NULL, NULL),
        (${userId}, 'Old complaint', 'angry@example.test', 'Inactive - Spam Complaint', NULL, NULL),
        (${userId}, 'Dead', 'dead@example.test', 'Inactive - Hard Bounce', NULL, NULL),
        (${otherUserId}, 'Other owner', 'gone@example.test', 'Subscribed', NULL, NULL)`.execute(db);
    await migrateToLatest(db as unknown as Kysely<unknown>, schema);
  });
  after(() => close());

  const contact = async (firstName: string) =>
    db.selectFrom('contacts').selectAll().where('first_name', '=', firstName).executeTakeFirstOrThrow();

  test('the addresses that said no are recorded; the contact re-created onto one takes the word back', async () => {
    const recorded = await db.selectFrom('email_opt_outs').select(['user_id', 'email_key', 'status']).orderBy('email_key').execute();
    assert.deepEqual(
      recorded.map((r) => [Number(r.user_id), r.email_key, r.status]),
      [
        [userId, 'angry@example.test', 'Inactive - Spam Complaint'],
        [userId, 'gone@example.test', 'Unsubscribed'],
      ],
    );
    const recreated = await contact('Re-created');
    assert.equal(recreated.status, 'Unsubscribed');
    assert.deepEqual(recreated.email_suppression, theirs);
    assert.equal((await contact('Owner re-created')).status, 'Subscribed', "the owner's own setting is theirs to undo");
    assert.equal((await contact('Other owner')).status, 'Subscribed', "another owner's contact is another sender's");
    assert.equal((await contact('Dead')).status, 'Inactive - Hard Bounce');
  });

  test('afterwards no write of the owner changes it, and a new contact at the address starts with it', async () => {
    for (const name of ['Re-created', 'Old complaint']) {
      const row = await contact(name);
      await assert.rejects(
        () => updateContact(db, row, { status: 'Subscribed' }, now),
        (error: unknown) => error instanceof DomainError && error.code === 'conflict' && /own word/.test(error.message),
        name,
      );
    }
    // A statement that does not ask (the owner's import, a hand-written UPDATE) is kept from it by the triggers.
    await sql`UPDATE contacts SET status = 'Subscribed', email_suppression = NULL WHERE first_name = 'Old complaint'`.execute(db);
    assert.equal((await contact('Old complaint')).status, 'Inactive - Spam Complaint');
    await sql`UPDATE contacts SET deleted_at = ${now} WHERE first_name = 'Old complaint'`.execute(db);
    const again = await createContact(db, userId, { email: 'Angry@Example.test', first_name: 'Again' }, now);
    assert.equal(again.status, 'Inactive - Spam Complaint');
    assert.equal(again.email_suppression?.reason, 'complaint');
  });
});
