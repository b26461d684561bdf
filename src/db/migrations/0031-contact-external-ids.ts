import { type Kysely, sql } from 'kysely';

// Correlation (docs/contacts.md, docs/webhooks.md): a contact may carry the id a CRM knows it by,
// unique among the owner's live contacts and searchable; the webhook events about it carry it
// (their snapshots are the row).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE contacts ADD COLUMN external_id text`.execute(db);
  await sql`
    CREATE UNIQUE INDEX contacts_owner_external_id_key ON contacts (user_id, external_id)
    WHERE deleted_at IS NULL AND external_id IS NOT NULL`.execute(db);
}
