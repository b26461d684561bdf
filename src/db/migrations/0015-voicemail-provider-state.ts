import { type Kysely, sql } from 'kysely';

// What Hopper keeps about each hand-over to a voicemail provider beyond the delivery ledger: the
// Idempotency-Key reused on every try, the provider's ids, the per-send callback token, the result
// (recorded once, whichever channel brings it first), the proof of delivery and when to ask again;
// the provider's id of each uploaded media item; and the provider events already handled.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE provider_submissions (
      delivery_id            bigint PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
      provider               text NOT NULL,
      -- The number as the provider writes it (E.164): signed webhooks name the drop only by it.
      phone                  text NOT NULL,
      idempotency_key        text NOT NULL,
      callback_token         text NOT NULL,
      remote_id              text,
      remote_drop_id         text,
      result_at              timestamptz,
      delivered              boolean,
      reason_code            integer,
      result_detail          text,
      result_occurred_at     timestamptz,
      proof_of_delivery_url  text,
      -- When to ask the provider for a result that has not arrived (Slybroadcast callstatus).
      next_check_at          timestamptz,
      checks                 integer NOT NULL DEFAULT 0,
      created_at             timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  // A signed webhook names only the number: the oldest submission to it still waiting.
  await sql`CREATE INDEX provider_submissions_waiting_idx ON provider_submissions (provider, phone, created_at) WHERE result_at IS NULL`.execute(
    db,
  );
  await sql`CREATE INDEX provider_submissions_drop_idx ON provider_submissions (provider, remote_drop_id) WHERE remote_drop_id IS NOT NULL`.execute(
    db,
  );
  await sql`CREATE INDEX provider_submissions_check_idx ON provider_submissions (next_check_at) WHERE next_check_at IS NOT NULL`.execute(
    db,
  );
  await sql`
    CREATE TABLE provider_media (
      provider    text NOT NULL,
      media_id    bigint NOT NULL REFERENCES media (id) ON DELETE CASCADE,
      remote_id   text NOT NULL,
      created_at  timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (provider, media_id)
    )`.execute(db);
  await sql`
    CREATE TABLE provider_events (
      provider     text NOT NULL,
      event_key    text NOT NULL,
      delivery_id  bigint REFERENCES deliveries (id) ON DELETE CASCADE,
      received_at  timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (provider, event_key)
    )`.execute(db);
}
