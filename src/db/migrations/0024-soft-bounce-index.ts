import { type Kysely, sql } from 'kysely';

// Repeated soft bounces (docs/outcomes.md): when an email delivery bounces softly, the contact's
// other bounced deliveries of the last days are counted. Bounced deliveries are few, so a partial
// index on them by contact keeps that count a short index read whatever the size of the ledger.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX deliveries_bounced_contact_idx ON deliveries (contact_id) WHERE state = 'bounced'`.execute(db);
}
