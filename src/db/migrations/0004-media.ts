import { type Kysely, sql } from 'kysely';

// Uploaded and fetched files (audio for voicemail drops). The bytes live in the media store
// (DATA_DIR/media by default) under `storage_key`; `token` is the unguessable part of the public
// URL. One statement per query: PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE media (
      id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id           bigint NOT NULL REFERENCES users (id),
      name              text NOT NULL,
      file_name         text NOT NULL,
      collection_name   text NOT NULL,
      mime_type         text NOT NULL,
      size              bigint NOT NULL CHECK (size >= 0),
      duration_seconds  double precision,
      token             text NOT NULL UNIQUE,
      storage_key       text NOT NULL,
      created_at        timestamptz NOT NULL DEFAULT now(),
      updated_at        timestamptz NOT NULL DEFAULT now(),
      deleted_at        timestamptz
    )`.execute(db);
  await sql`CREATE INDEX media_user_id_idx ON media (user_id, id) WHERE deleted_at IS NULL`.execute(db);
}
