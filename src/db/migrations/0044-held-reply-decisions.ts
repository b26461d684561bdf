import { type Kysely, sql } from 'kysely';

// What the agent decided about a held reply on /replies (inbound/held-replies.ts): Release
// (`released_at`: forwarded to the agent now, once — `forwarded_at` says when it went) or Discard
// (`discarded_at`: kept for the record, never forwarded). Both stay null for every other reply.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE replies
      ADD COLUMN released_at timestamptz,
      ADD COLUMN discarded_at timestamptz`.execute(db);
}
