import { type Kysely, sql } from 'kysely';

// Drop Cowboy's proof-of-delivery webhooks (`contact.rvm.receipt`) name the send only by the number:
// their `drop_id` is not the status's, and they carry no `foreign_id` or `message_id`. A receipt is
// not a result: it is kept here and paired with the delivery its status went to (the same number,
// the same reason code, close in time), or waits here until that status is recorded.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE provider_receipts (
      provider               text NOT NULL,
      event_key              text NOT NULL,
      phone                  text NOT NULL,
      remote_drop_id         text,
      reason_code            integer,
      proof_of_delivery_url  text,
      -- The provider's time of the event (event_at), and Hopper's time of receiving it.
      occurred_at            timestamptz,
      received_at            timestamptz NOT NULL,
      -- Null while no recorded result of that number is its status's.
      delivery_id            bigint REFERENCES deliveries (id) ON DELETE CASCADE,
      PRIMARY KEY (provider, event_key)
    )`.execute(db);
  await sql`CREATE INDEX provider_receipts_pending_idx ON provider_receipts (provider, phone, received_at) WHERE delivery_id IS NULL`.execute(
    db,
  );
  // One receipt per send.
  await sql`CREATE UNIQUE INDEX provider_receipts_delivery_idx ON provider_receipts (provider, delivery_id) WHERE delivery_id IS NOT NULL`.execute(
    db,
  );
  // A receipt looks for the recorded results of its number.
  await sql`CREATE INDEX provider_submissions_result_idx ON provider_submissions (provider, phone, result_at) WHERE result_at IS NOT NULL`.execute(
    db,
  );
}
