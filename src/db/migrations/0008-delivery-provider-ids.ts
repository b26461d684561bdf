import { type Kysely, sql } from 'kysely';

// Provider callbacks that name a drop by the provider's own id (Slybroadcast's session id, Drop
// Cowboy's message id) find its delivery through this index rather than a scan of the ledger.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX deliveries_provider_message_idx ON deliveries (provider_message_id)
    WHERE provider_message_id IS NOT NULL`.execute(db);
}
