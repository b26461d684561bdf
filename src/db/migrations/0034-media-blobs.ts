import { type Kysely, sql } from 'kysely';

// The media store in the database (MEDIA_STORE=postgres, the default with DATABASE_URL): every API
// process reads the same bytes, so a `full_url` works behind any of them (docs/media.md). A file is
// kept as parts of up to 256 KiB keyed by their first byte, so a range request reads only the parts
// it needs. EXTERNAL storage: audio is compressed already, and uncompressed TOAST lets PostgreSQL
// read a part without inflating it.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE media_blobs (
      storage_key  text NOT NULL,
      byte_offset  bigint NOT NULL CHECK (byte_offset >= 0),
      bytes        bytea NOT NULL,
      PRIMARY KEY (storage_key, byte_offset)
    )`.execute(db);
  await sql`ALTER TABLE media_blobs ALTER COLUMN bytes SET STORAGE EXTERNAL`.execute(db);
}
