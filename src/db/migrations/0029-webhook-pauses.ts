import { type Kysely, sql } from 'kysely';

// Outbound webhooks (docs/webhooks.md): an endpoint that answered 429 or 503 with Retry-After is
// left alone until then — none of its deliveries is claimed, not only the one that was answered.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE webhook_endpoints ADD COLUMN paused_until timestamptz`.execute(db);
}
