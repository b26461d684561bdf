import { type Kysely, sql } from 'kysely';

// Ids are bigint identities read back as JS numbers (see database.ts). One statement per query:
// PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE teams (
      id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      name        text NOT NULL,
      created_at  timestamptz NOT NULL DEFAULT now(),
      updated_at  timestamptz NOT NULL DEFAULT now()
    )`.execute(db);

  await sql`
    CREATE TABLE users (
      id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      team_id       bigint REFERENCES teams (id),
      first_name    text NOT NULL,
      last_name     text NOT NULL,
      email         text NOT NULL,
      phone         text,
      time_zone     text,
      status        text NOT NULL DEFAULT 'Active' CHECK (status IN ('Active', 'Cancelled')),
      roles         text[] NOT NULL,
      cancelled_at  timestamptz,
      created_at    timestamptz NOT NULL DEFAULT now(),
      updated_at    timestamptz NOT NULL DEFAULT now(),
      deleted_at    timestamptz
    )`.execute(db);
  // One live account per address, whatever its case.
  await sql`CREATE UNIQUE INDEX users_email_key ON users (lower(email)) WHERE deleted_at IS NULL`.execute(db);
  await sql`CREATE INDEX users_team_id_idx ON users (team_id, id) WHERE deleted_at IS NULL`.execute(db);

  await sql`
    CREATE TABLE api_keys (
      id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id       bigint NOT NULL REFERENCES users (id),
      name          text NOT NULL,
      prefix        text NOT NULL,
      key_hash      bytea NOT NULL UNIQUE,
      created_at    timestamptz NOT NULL DEFAULT now(),
      last_used_at  timestamptz,
      revoked_at    timestamptz
    )`.execute(db);
  await sql`CREATE INDEX api_keys_user_id_idx ON api_keys (user_id, id)`.execute(db);
}
