import { type Kysely, sql } from 'kysely';

// One delivery per address (resolveDeliveries, sending/deliveries.ts): the first contact (by id) of
// a message to reach an address, in any letter case, claims it here; the others are `skipped`,
// naming it. A claim is an insert into a primary key (ON CONFLICT DO NOTHING) and a look-up by the
// whole key, so each contact costs one probe however the planner judges the size of the message
// (its statistics lag behind a send being resolved: a join or a filtered scan of the message's
// deliveries made resolving N recipients cost about N²/2 row visits).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE delivery_addresses (
      message_kind  text NOT NULL,
      message_id    bigint NOT NULL,
      address_key   text NOT NULL,
      contact_id    bigint NOT NULL,
      PRIMARY KEY (message_kind, message_id, address_key)
    )`.execute(db);
}
