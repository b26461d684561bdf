import { type Kysely, sql } from 'kysely';

// Server-made secrets that every process sharing the database must agree on and that must
// survive restarts (the key that signs tracking and unsubscribe links). Each is made once, by
// whichever process asks first (db/secrets.ts); configuration stays environment-only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE secrets (
      name        text PRIMARY KEY,
      value       bytea NOT NULL,
      created_at  timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
}
