import { type Kysely, sql } from 'kysely';

// The per-recipient delivery ledger of the sending engine. One statement per query: PGlite runs
// prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  // When the recipients of a message were resolved into deliveries (null: not yet, or unfinished).
  await sql`ALTER TABLE voicemail_drops ADD COLUMN resolved_at timestamptz`.execute(db);
  await sql`ALTER TABLE templated_emails ADD COLUMN resolved_at timestamptz`.execute(db);

  await sql`
    CREATE TABLE deliveries (
      id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id              bigint NOT NULL,
      message_kind         text NOT NULL CHECK (message_kind IN ('voicemail_drop', 'templated_email')),
      message_id           bigint NOT NULL,
      contact_id           bigint NOT NULL,
      -- The address or number used, as it was when the recipients were resolved.
      address              text NOT NULL,
      state                text NOT NULL DEFAULT 'queued' CHECK (state IN (
                             'queued', 'sending', 'deferred', 'held', 'sent', 'delivered',
                             'bounced', 'dropped', 'failed', 'cancelled')),
      provider_message_id  text,
      attempts             integer NOT NULL DEFAULT 0,
      last_error           text,
      -- When a queued, deferred or held delivery may next be tried.
      next_attempt_at      timestamptz NOT NULL DEFAULT now(),
      -- A worker's claim on a delivery in 'sending'; past it, the claim is abandoned (a crash).
      lease_until          timestamptz,
      created_at           timestamptz NOT NULL DEFAULT now(),
      updated_at           timestamptz NOT NULL DEFAULT now(),
      sent_at              timestamptz,
      delivered_at         timestamptz,
      UNIQUE (message_kind, message_id, contact_id)
    )`.execute(db);
  // Claiming work: the next deliveries of a message that are due, in id order.
  await sql`
    CREATE INDEX deliveries_claim_idx ON deliveries (message_kind, message_id, next_attempt_at, id)
    WHERE state IN ('queued', 'deferred', 'held')`.execute(db);
  // Abandoned claims, found by the sweeper.
  await sql`CREATE INDEX deliveries_lease_idx ON deliveries (lease_until) WHERE state = 'sending'`.execute(db);
  // The deliveries listing of a message, by state.
  await sql`CREATE INDEX deliveries_message_state_idx ON deliveries (message_kind, message_id, state, id)`.execute(db);

  // Every event about a delivery, once: (source, event_id) is the provider's own identity of the
  // event, so a webhook batch delivered twice is stored once and counted once.
  await sql`
    CREATE TABLE delivery_events (
      id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      source       text NOT NULL,
      event_id     text NOT NULL,
      delivery_id  bigint NOT NULL REFERENCES deliveries (id),
      type         text NOT NULL,
      occurred_at  timestamptz NOT NULL,
      detail       text,
      received_at  timestamptz NOT NULL DEFAULT now(),
      UNIQUE (source, event_id)
    )`.execute(db);
  await sql`CREATE INDEX delivery_events_delivery_idx ON delivery_events (delivery_id, occurred_at)`.execute(db);
}
