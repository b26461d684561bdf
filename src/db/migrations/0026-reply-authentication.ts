import { type Kysely, sql } from 'kysely';

// What the inbound receiver found of a reply's sender (SPF, DKIM and DMARC, checked by mailauth)
// and, for a reply not forwarded to the agent, why it is held: a DMARC failure (mail dressed as
// someone it is not) or the limit on forwards per reply address (docs/inbound.md).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE replies ADD COLUMN authentication jsonb, ADD COLUMN held_reason text`.execute(db);
  await sql`
    ALTER TABLE replies ADD CONSTRAINT replies_held_reason_check
      CHECK (held_reason IS NULL OR held_reason IN ('dmarc_fail', 'forward_limit'))`.execute(db);
  // The forwards of one reply address (delivery) in the last day, counted for the limit.
  await sql`CREATE INDEX replies_delivery_received_idx ON replies (delivery_id, received_at)`.execute(db);
}
