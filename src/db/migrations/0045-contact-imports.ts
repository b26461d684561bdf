import { type Kysely, sql } from 'kysely';

// Contact imports in the browser (contacts/import-runs.ts, /contacts/import): the uploaded CSV is
// kept here between the preview of its mapping and the import (every API process can read it),
// with the preview's reading of it, the columns the person mapped, the import's progress and, at
// the end, its counts and refused rows. The file is dropped once it is imported.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE contact_imports (
      id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id     bigint NOT NULL REFERENCES users (id),
      file_name   text NOT NULL,
      file        bytea,
      encoding    text NOT NULL,
      separator   text NOT NULL,
      header      jsonb NOT NULL,
      sample      jsonb NOT NULL,
      row_count   integer NOT NULL,
      mapping     jsonb NOT NULL,
      state       text NOT NULL CHECK (state IN ('staged', 'importing', 'done', 'failed')),
      rows_done   integer NOT NULL DEFAULT 0,
      created     integer,
      updated     integer,
      refused     jsonb,
      error       text,
      created_at  timestamptz NOT NULL,
      updated_at  timestamptz NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX contact_imports_user_id_idx ON contact_imports (user_id, created_at)`.execute(db);
}
