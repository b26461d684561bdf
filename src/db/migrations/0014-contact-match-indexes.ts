import { type Kysely, sql } from 'kysely';

// The contact import matches each row to a live contact by email (any case; the index on
// (user_id, lower(email)) of migration 0012 serves it) or, without an email, by phone: one index
// lookup a row instead of a scan of the user's contacts per batch.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX contacts_user_phone_idx ON contacts (user_id, phone) WHERE deleted_at IS NULL AND email IS NULL`.execute(db);
}
