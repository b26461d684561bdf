import { type Kysely, sql } from 'kysely';

// One-time invitation links (identity/invitations.ts): whoever may manage a user without a
// password makes one, and the user sets their own first password through it. Only the token's
// SHA-256 is kept, so a copy of the table opens no account.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE user_invitations (
      id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id     bigint NOT NULL REFERENCES users (id),
      token_hash  bytea NOT NULL UNIQUE,
      created_by  bigint NOT NULL REFERENCES users (id),
      created_at  timestamptz NOT NULL,
      expires_at  timestamptz NOT NULL,
      used_at     timestamptz
    )`.execute(db);
  await sql`CREATE INDEX user_invitations_user_id_idx ON user_invitations (user_id)`.execute(db);
}
