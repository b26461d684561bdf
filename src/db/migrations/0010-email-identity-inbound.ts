import { type Kysely, sql } from 'kysely';

// Sender identity per user (null: the default, worked out when read — full name, account email)
// and the mail Hopper receives: replies kept for the agent, and one row per inbound message
// (Message-ID + the address it came to), so a retried delivery from the sending MTA is recorded once.
// One statement per query: PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE users ADD COLUMN sender_name text, ADD COLUMN sender_email text, ADD COLUMN postal_address text`.execute(db);
  await sql`
    CREATE TABLE inbound_messages (
      id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      recipient      text NOT NULL,
      message_id     text NOT NULL,
      delivery_id    bigint NOT NULL REFERENCES deliveries (id),
      kind           text NOT NULL CHECK (kind IN ('reply', 'bounce', 'complaint', 'unsubscribe')),
      received_at    timestamptz NOT NULL,
      UNIQUE (recipient, message_id)
    )`.execute(db);
  await sql`
    CREATE TABLE replies (
      id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      inbound_id     bigint NOT NULL REFERENCES inbound_messages (id),
      delivery_id    bigint NOT NULL REFERENCES deliveries (id),
      user_id        bigint NOT NULL,
      message_kind   text NOT NULL,
      message_id     bigint NOT NULL,
      contact_id     bigint NOT NULL,
      from_address   text NOT NULL,
      from_name      text,
      subject        text NOT NULL,
      text           text NOT NULL,
      auto_reply     boolean NOT NULL,
      received_at    timestamptz NOT NULL,
      forwarded_at   timestamptz
    )`.execute(db);
  await sql`CREATE INDEX replies_message_idx ON replies (message_kind, message_id, id)`.execute(db);
}
