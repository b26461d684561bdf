import { type Kysely, type RawBuilder, sql } from 'kysely';

// Each owner's live messages by status, kept beside the version (migrations 0009 and 0011) in the
// same row, by the trigger that keeps the version. A search's exact total counted its `status=…`
// part again whenever the owner's messages had changed: while drops were being created many times a
// second, nearly every `status=Saved&name=…` search counted ~95,000 Saved drops anew, and under ten
// minutes of mixed load a few ran past the one-second statement timeout (a 503; docs/performance.md,
// "Status counts kept by the database"). The part is now the sum of ≤ 16 shard rows, whatever the
// owner's size; so is `/metrics`' count of messages by status.
//
// The trigger now runs once per statement, over its transition tables, instead of once per row:
// per row, a statement writing many rows of one owner updated the same shard row once per row, and
// each update walked that row's growing chain of versions (20,000 drops in one INSERT: 6–8 s).

/** The statuses of a message when this was written (messages/lifecycle.ts), each a column. */
const STATUSES = ['Saved', 'Scheduled', 'Sending', 'Sent', 'Failed', 'Cancelled'];
const column = (status: string) => sql.id(status.toLowerCase());

export async function up(db: Kysely<unknown>): Promise<void> {
  // No message is written until the counts below are in place and the trigger keeps them.
  await sql`LOCK TABLE voicemail_drops, templated_emails IN SHARE MODE`.execute(db);
  for (const status of STATUSES) {
    await sql`ALTER TABLE collection_versions ADD COLUMN ${column(status)} bigint NOT NULL DEFAULT 0`.execute(db);
  }

  // One statement's changes, per owner: the version bumped once, and each status's count moved by
  // the rows that entered it (`+1`, live rows of `new_rows`) and left it (`-1`, live rows of
  // `old_rows`). A shard may go below zero (rows counted by one session and deleted by another);
  // the sum is exact. Owners in id order, so concurrent statements take their rows' locks alike.
  const upsert = (changes: RawBuilder<unknown>) => sql`
      INSERT INTO collection_versions AS v (collection, user_id, shard, ${sql.join(STATUSES.map(column))})
      SELECT TG_TABLE_NAME, c.user_id, pg_backend_pid() % 16, ${sql.join(
        STATUSES.map((status) => sql`coalesce(sum(c.d) FILTER (WHERE c.deleted_at IS NULL AND c.status = ${sql.lit(status)}), 0)`),
      )}
      FROM (${changes}) c GROUP BY c.user_id ORDER BY c.user_id
      ON CONFLICT (collection, user_id, shard) DO UPDATE SET version = v.version + 1, ${sql.join(
        STATUSES.map((status) => sql`${column(status)} = v.${column(status)} + excluded.${column(status)}`),
      )};`;
  const entered = sql`SELECT user_id, status, deleted_at, 1 AS d FROM new_rows`;
  const left = sql`SELECT user_id, status, deleted_at, -1 AS d FROM old_rows`;
  await sql`
    CREATE FUNCTION count_collection_changes() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        ${upsert(entered)}
      ELSIF TG_OP = 'UPDATE' THEN
        ${upsert(sql`${entered} UNION ALL ${left}`)}
      ELSE
        ${upsert(left)}
      END IF;
      RETURN NULL;
    END
    $$`.execute(db);
  for (const table of ['voicemail_drops', 'templated_emails']) {
    await sql`DROP TRIGGER ${sql.id(`${table}_version`)} ON ${sql.table(table)}`.execute(db);
    for (const [event, transition] of [
      ['INSERT', sql`NEW TABLE AS new_rows`],
      ['UPDATE', sql`OLD TABLE AS old_rows NEW TABLE AS new_rows`],
      ['DELETE', sql`OLD TABLE AS old_rows`],
    ] as const) {
      await sql`
        CREATE TRIGGER ${sql.id(`${table}_version_${event.toLowerCase()}`)} AFTER ${sql.raw(event)} ON ${sql.table(table)}
        REFERENCING ${transition} FOR EACH STATEMENT EXECUTE FUNCTION count_collection_changes()`.execute(db);
    }
  }
  await sql`DROP FUNCTION bump_collection_version()`.execute(db);

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
