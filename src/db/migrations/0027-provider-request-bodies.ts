import { type Kysely, sql } from 'kysely';

// What a voicemail hand-over keeps so that it can be tried again unchanged, and why it ended:
// - request_body: the exact body of the first request sent under the submission's Idempotency-Key.
//   Every retry re-sends these bytes, whatever the configuration says by then (a provider answers
//   a key re-used with another body with an error, and drops nothing: Drop Cowboy's 3027).
// - result_outcome: the provider's result in Hopper's classification (docs/outcomes.md), kept with
//   the result so that whichever channel brings it, the delivery's outcome is the same.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE provider_submissions ADD COLUMN request_body text, ADD COLUMN result_outcome jsonb`.execute(db);
}
