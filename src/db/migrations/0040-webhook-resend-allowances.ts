import { type Kysely, sql } from 'kysely';

// How many events a user's endpoints were resent in the current hour (issue 36, finding 7): one
// resend re-queued up to 10,000 events to a URL its user chose, as often as asked. A row per user
// who resent anything; the window starts at the first resend after the last one ended.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE webhook_resend_allowances (
      user_id           bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
      window_started_at timestamptz NOT NULL,
      resent            integer NOT NULL
    )`.execute(db);
}
