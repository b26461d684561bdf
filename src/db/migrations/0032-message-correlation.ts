import { type Kysely, sql } from 'kysely';

// Correlation (docs/webhooks.md): a voicemail drop or templated email may carry the id a CRM knows
// it by, unique among the owner's live messages of that kind and searchable, and a small metadata
// object of strings; the events about the message and its deliveries carry both.
export async function up(db: Kysely<unknown>): Promise<void> {
  for (const table of ['voicemail_drops', 'templated_emails']) {
    await sql`ALTER TABLE ${sql.table(table)} ADD COLUMN external_id text`.execute(db);
    await sql`ALTER TABLE ${sql.table(table)} ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb`.execute(db);
    await sql`
      CREATE UNIQUE INDEX ${sql.id(`${table}_owner_external_id_key`)} ON ${sql.table(table)} (user_id, external_id)
      WHERE deleted_at IS NULL AND external_id IS NOT NULL`.execute(db);
  }
}
