import { type Kysely, sql } from 'kysely';

// A change counter per owned collection and owner: every insert, update or (soft) delete of a
// voicemail drop or templated email bumps its owner's counter, in the same transaction. A search
// total counted while the counter had a value stays exact while it keeps that value, so paging
// through a large result and repeating a search count the rows once (http/search.ts).
// One statement per query: PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE collection_versions (
      collection  text NOT NULL,
      user_id     bigint NOT NULL,
      version     bigint NOT NULL DEFAULT 1,
      PRIMARY KEY (collection, user_id)
    )`.execute(db);
  await sql`
    CREATE FUNCTION bump_collection_version() RETURNS trigger LANGUAGE plpgsql
    -- The schema it was made in, whatever the search_path of the session that fires it.
    SET search_path FROM CURRENT AS $$
    BEGIN
      INSERT INTO collection_versions AS v (collection, user_id)
      VALUES (TG_TABLE_NAME, CASE WHEN TG_OP = 'DELETE' THEN OLD.user_id ELSE NEW.user_id END)
      ON CONFLICT (collection, user_id) DO UPDATE SET version = v.version + 1;
      IF TG_OP = 'UPDATE' AND NEW.user_id IS DISTINCT FROM OLD.user_id THEN
        INSERT INTO collection_versions AS v (collection, user_id) VALUES (TG_TABLE_NAME, OLD.user_id)
        ON CONFLICT (collection, user_id) DO UPDATE SET version = v.version + 1;
      END IF;
      RETURN NULL;
    END
    $$`.execute(db);
  for (const table of ['voicemail_drops', 'templated_emails']) {
    await sql`
      CREATE TRIGGER ${sql.id(`${table}_version`)} AFTER INSERT OR UPDATE OR DELETE ON ${sql.table(table)}
      FOR EACH ROW EXECUTE FUNCTION bump_collection_version()`.execute(db);
  }
}
