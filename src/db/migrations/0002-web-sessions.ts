import { type Kysely, sql } from 'kysely';

// Sign-in for the web pages: a password per user, server-side sessions, and the failed sign-ins
// that throttle password guessing. One statement per query: PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  // PHC-format scrypt hash; null until a password is set (such a user can only use API keys).
  await sql`ALTER TABLE users ADD COLUMN password_hash text`.execute(db);

  // Only the SHA-256 of the session token is kept: a copy of this table signs nobody in.
  await sql`
    CREATE TABLE web_sessions (
      id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id       bigint NOT NULL REFERENCES users (id),
      token_hash    bytea NOT NULL UNIQUE,
      created_at    timestamptz NOT NULL,
      last_seen_at  timestamptz NOT NULL,
      expires_at    timestamptz NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX web_sessions_user_id_idx ON web_sessions (user_id)`.execute(db);
  await sql`CREATE INDEX web_sessions_expires_at_idx ON web_sessions (expires_at)`.execute(db);

  // One row per failed sign-in and per subject ('account:<email>' and 'address:<ip>'), kept only
  // for the throttling window. In the database, not in memory, because every API process must
  // see the same count (README, "Running at scale": API processes are stateless and many).
  await sql`
    CREATE TABLE web_sign_in_failures (
      id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      subject    text NOT NULL,
      failed_at  timestamptz NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX web_sign_in_failures_subject_idx ON web_sign_in_failures (subject, failed_at)`.execute(db);
  await sql`CREATE INDEX web_sign_in_failures_failed_at_idx ON web_sign_in_failures (failed_at)`.execute(db);
}
