import { type Kysely, sql } from 'kysely';

// Text filters served by an index (docs/performance.md). A case-insensitive substring filter
// (`name ILIKE '%abc%'`) cannot use a b-tree; pg_trgm's GIN operator class indexes the trigrams
// of each value, and btree_gin lets the same GIN index hold the owner's id, so one index scan
// finds "this owner's rows whose name has these trigrams" without visiting other owners' rows.
// One multi-column index per table: GIN answers a condition on any subset of its columns, and an
// insert updates one index instead of one per column.
//
// The extensions are database-wide: they go in `public` (or stay wherever an operator already
// installed them), never in Hopper's schema, which tests and other instances drop. Both are
// trusted extensions, so a database owner without superuser may create them.
// One statement per query: PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  // Two instances migrating two schemas of one database at once must not both create them.
  await sql`SELECT pg_advisory_xact_lock(hashtext('hopper: extensions'))`.execute(db);
  await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public`.execute(db);
  await sql`CREATE EXTENSION IF NOT EXISTS btree_gin WITH SCHEMA public`.execute(db);
  const { rows } = await sql<{ schema: string }>`
    SELECT extnamespace::regnamespace::text AS schema FROM pg_extension WHERE extname = 'pg_trgm'`.execute(db);
  const trgm = sql.raw(`${sql.id(rows[0]?.schema ?? 'public').compile(db).sql}.gin_trgm_ops`);

  const indexes: [table: string, columns: string[]][] = [
    ['voicemail_drops', ['name', 'description']],
    ['templated_emails', ['subject', 'description']],
    ['contacts', ['first_name', 'last_name', 'email', 'phone']],
  ];
  for (const [table, columns] of indexes) {
    const trigrams = sql.join(columns.map((column) => sql`${sql.id(column)} ${trgm}`));
    await sql`
      CREATE INDEX ${sql.id(`${table}_text_search_idx`)} ON ${sql.table(table)}
      USING gin (user_id, ${trigrams}) WHERE deleted_at IS NULL`.execute(db);
  }

  // Each API process keeps the principals of recent keys (http/authenticate.ts) and forgets them
  // all when told that a key or a user changed: revoked, deleted, cancelled, moved to another team
  // or given other roles. The notice goes out at commit, to every process listening on the
  // database (PGlite: this process). Touching a key's last_used_at tells nobody.
  await sql`
    CREATE FUNCTION notify_principals_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('hopper_principals', TG_TABLE_NAME);
      RETURN NULL;
    END
    $$`.execute(db);
  await sql`
    CREATE TRIGGER api_keys_principals_changed AFTER UPDATE OF revoked_at, key_hash, user_id OR DELETE OR TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed()`.execute(db);
  await sql`
    CREATE TRIGGER users_principals_changed AFTER UPDATE OR DELETE OR TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed()`.execute(db);

  // Creates of one owner's drops ran one at a time: each bumped the owner's one version row
  // (migration 0009) and held its lock until commit. The counter is now sharded like the message
  // counters: a session bumps the shard its backend id picks, and the version is the sum of the
  // shards, which still grows with every committed change.
  await sql`ALTER TABLE collection_versions ADD COLUMN shard smallint NOT NULL DEFAULT 0`.execute(db);
  await sql`ALTER TABLE collection_versions DROP CONSTRAINT collection_versions_pkey`.execute(db);
  await sql`ALTER TABLE collection_versions ADD PRIMARY KEY (collection, user_id, shard)`.execute(db);
  await sql`
    CREATE OR REPLACE FUNCTION bump_collection_version() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    DECLARE
      session_shard smallint := pg_backend_pid() % 16;
    BEGIN
      INSERT INTO collection_versions AS v (collection, user_id, shard)
      VALUES (TG_TABLE_NAME, CASE WHEN TG_OP = 'DELETE' THEN OLD.user_id ELSE NEW.user_id END, session_shard)
      ON CONFLICT (collection, user_id, shard) DO UPDATE SET version = v.version + 1;
      IF TG_OP = 'UPDATE' AND NEW.user_id IS DISTINCT FROM OLD.user_id THEN
        INSERT INTO collection_versions AS v (collection, user_id, shard) VALUES (TG_TABLE_NAME, OLD.user_id, session_shard)
        ON CONFLICT (collection, user_id, shard) DO UPDATE SET version = v.version + 1;
      END IF;
      RETURN NULL;
    END
    $$`.execute(db);
}
