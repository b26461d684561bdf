import { type Kysely, sql } from 'kysely';

// A delivery may be `skipped`: its contact shares an email address (any letter case) or a phone
// number with another recipient of the same message, who gets the one email or drop. Kept in the
// ledger so the deliveries listing says which contact was skipped and why (`last_error`).
// One statement per query: PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check`.execute(db);
  await sql`
    ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check CHECK (state IN (
      'queued', 'sending', 'deferred', 'held', 'sent', 'delivered',
      'bounced', 'dropped', 'failed', 'cancelled', 'skipped'))`.execute(db);
  // Creating a contact looks its owner's contacts up by email address, in any letter case.
  await sql`CREATE INDEX contacts_owner_email_idx ON contacts (user_id, lower(email)) WHERE deleted_at IS NULL`.execute(db);
}
