import { type Kysely, sql } from 'kysely';

// The text-search GIN indexes of 0011 with a short pending list (docs/performance.md). GIN keeps
// new rows in an unsorted pending list that every search reads from end to end until it is merged
// into the index, by a vacuum or once it outgrows gin_pending_list_limit (4 MB by default): after a
// few thousand creates a three-letter search that matched nothing took 2.3 ms instead of 0.05 ms.
// At 256 kB a search reads little of it, and the create that fills it merges it. Without a pending
// list at all (fastupdate off) every insert updated the postings of each of its trigrams at once:
// 9 ms of PostgreSQL per contact created, whose names and addresses share many trigrams.
export async function up(db: Kysely<unknown>): Promise<void> {
  for (const table of ['voicemail_drops', 'templated_emails', 'contacts']) {
    const index = `${table}_text_search_idx`;
    await sql`ALTER INDEX ${sql.id(index)} SET (gin_pending_list_limit = 256)`.execute(db);
    // What is already pending is merged now rather than by the next vacuum.
    await sql`SELECT gin_clean_pending_list(${index}::regclass)`.execute(db);
  }
}
