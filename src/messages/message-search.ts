import { type SelectQueryBuilder, sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { type CountCache, type Filters, runSearch, type SearchParams, type SearchResult } from '../db/search.ts';
import { MESSAGE_TABLES, type MessageKind } from './kinds.ts';

/**
 * A search of one owner's messages of one kind, `live` being the kind's table (alias `msg`)
 * narrowed to live rows (runSearch narrows it to the owner's). The page's ids and the total come
 * from the message table alone (the owner is known to be live, and every message's media exists);
 * the page's rows are read by `rowsByIds` (the kind's joined read) for those ids. Totals are reused while
 * the owner's messages are unchanged (`totals`, see CountCache): the owner's change counter, kept
 * by a trigger (db/migrations/0009), is read in the same statement.
 */
export function searchMessages<DB, TB extends keyof DB>(
  db: Db,
  kind: MessageKind,
  ownerId: number,
  live: SelectQueryBuilder<DB, TB, object>,
  params: SearchParams,
  filters: Filters,
  rowsByIds: (ids: number[]) => Promise<object[]>,
  totals: CountCache,
): Promise<SearchResult<object>> {
  const table = MESSAGE_TABLES[kind];
  const version = sql<string | null>`(SELECT sum(version) FROM collection_versions WHERE collection = ${table} AND user_id = ${ownerId})`;
  return runSearch<object>(live, filters, params, 'msg.id', {
    counts: { db, cache: totals, key: `${table} ${ownerId}`, version },
    rowsByIds,
    owner: { column: 'msg.user_id', id: ownerId },
  });
}
