import { type Kysely, type RawBuilder, sql } from 'kysely';

// Each owner's live messages by status, kept by the trigger that keeps the version (migrations
// 0009 and 0011), in the same row and the same upsert. A search's exact total counted its
// `status=…` part again whenever the owner's messages had changed: while drops were being created
// many times a second, nearly every `status=Saved&name=…` search counted ~95,000 Saved drops anew,
// and under ten minutes of mixed load a few ran past the one-second statement timeout (a 503;
// docs/performance.md, "Status counts kept by the database"). The part is now the sum of ≤ 16
// shard rows, whatever the owner's size.

/** The statuses of a message when this was written (messages/lifecycle.ts), each a column. */
const STATUSES = ['Saved', 'Scheduled', 'Sending', 'Sent', 'Failed', 'Cancelled'];
const column = (status: string) => sql.id(status.toLowerCase());

export async function up(db: Kysely<unknown>): Promise<void> {
  // No message is written until the counts below are in place and the trigger keeps them.
  await sql`LOCK TABLE voicemail_drops, templated_emails IN SHARE MODE`.execute(db);
  for (const status of STATUSES) {
    await sql`ALTER TABLE collection_versions ADD COLUMN ${column(status)} bigint NOT NULL DEFAULT 0`.execute(db);
  }

  // One change of one owner's row: its version, minus one on the status the row had (`gone`, when
  // it was live) and plus one on the status it has (`came`, when it is live). A shard may go
  // below zero (a row counted by one session and deleted by another); the sum is exact.
  const change = (owner: RawBuilder<unknown>, gone: RawBuilder<unknown>, came: RawBuilder<unknown>) => sql`
      INSERT INTO collection_versions AS v (collection, user_id, shard, ${sql.join(STATUSES.map(column))})
      VALUES (TG_TABLE_NAME, ${owner}, session_shard, ${sql.join(
        STATUSES.map(
          (status) => sql`(${came} IS NOT DISTINCT FROM ${sql.lit(status)})::int - (${gone} IS NOT DISTINCT FROM ${sql.lit(status)})::int`,
        ),
      )})
      ON CONFLICT (collection, user_id, shard) DO UPDATE SET version = v.version + 1, ${sql.join(
        STATUSES.map((status) => sql`${column(status)} = v.${column(status)} + excluded.${column(status)}`),
      )};`;
  await sql`
    CREATE OR REPLACE FUNCTION bump_collection_version() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    DECLARE
      session_shard smallint := pg_backend_pid() % 16;
      gone text;
      came text;
    BEGIN
      IF TG_OP <> 'INSERT' THEN
        IF OLD.deleted_at IS NULL THEN gone := OLD.status; END IF;
      END IF;
      IF TG_OP <> 'DELETE' THEN
        IF NEW.deleted_at IS NULL THEN came := NEW.status; END IF;
      END IF;
      IF TG_OP = 'UPDATE' AND NEW.user_id IS DISTINCT FROM OLD.user_id THEN
        ${change(sql`OLD.user_id`, sql`gone`, sql`NULL`)}
        ${change(sql`NEW.user_id`, sql`NULL`, sql`came`)}
      ELSIF TG_OP = 'DELETE' THEN
        ${change(sql`OLD.user_id`, sql`gone`, sql`came`)}
      ELSE
        ${change(sql`NEW.user_id`, sql`gone`, sql`came`)}
      END IF;
      RETURN NULL;
    END
    $$`.execute(db);

  // The messages already there: each owner's counts go to shard 0 (the other shards hold none yet).
  for (const table of ['voicemail_drops', 'templated_emails']) {
    await sql`
      INSERT INTO collection_versions AS v (collection, user_id, shard, ${sql.join(STATUSES.map(column))})
      SELECT ${table}, user_id, 0, ${sql.join(STATUSES.map((status) => sql`count(*) FILTER (WHERE status = ${sql.lit(status)})`))}
      FROM ${sql.table(table)} WHERE deleted_at IS NULL GROUP BY user_id
      ON CONFLICT (collection, user_id, shard) DO UPDATE SET ${sql.join(
        STATUSES.map((status) => sql`${column(status)} = excluded.${column(status)}`),
      )}`.execute(db);
  }
}
