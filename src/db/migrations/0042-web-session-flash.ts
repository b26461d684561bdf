import { type Kysely, sql } from 'kysely';

// A page's one-time message across a redirect (web/flash.ts): a form answers its POST with a
// redirect, and what the next page must show once (a new API key) waits here, sealed with a key
// derived from the session's cookie token, so the table alone never reveals it.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE web_sessions ADD COLUMN flash bytea`.execute(db);
}
