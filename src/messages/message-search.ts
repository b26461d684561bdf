import { type SelectQueryBuilder, sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { precompiled } from '../db/precompiled.ts';
import { type CountCache, type Filters, runSearch, type SearchParams, type SearchResult } from '../db/search.ts';
import { MESSAGE_TABLES, type MessageKind } from './kinds.ts';

/**
 * A search of one owner's messages of one kind, `ownedLive` being the kind's table (alias `msg`)
 * narrowed to the owner's live rows. The page's ids and the total come from the
 * message table alone (the owner is known to be live, and every message's media exists); the
 * page's rows are then read by id in one statement that is prepared once, however the search was
 * filtered (`rowsByIds`, the kind's joined read). Totals are reused while the owner's messages
 * are unchanged (`totals`, see CountCache).
 */
export function searchMessages<DB, TB extends keyof DB>(
  db: Db,
  kind: MessageKind,
  ownerId: number,
  ownedLive: SelectQueryBuilder<DB, TB, object>,
  params: SearchParams,
  filters: Filters,
  rowsByIds: (ids: number[]) => Promise<object[]>,
  totals: CountCache,
): Promise<SearchResult<object>> {
  const table = MESSAGE_TABLES[kind];
  return runSearch<object>(ownedLive, filters, params, 'msg.id', {
    counts: { cache: totals, key: `${table} ${ownerId}`, version: () => collectionVersion(db, table, ownerId) },
    rowsByIds,
  });
}

/** The change counter of a user's messages in `collection`, kept by a trigger (db/migrations/0009). */
const versionRow = precompiled(2, (db, collection: string, userId: number) =>
  db
    .selectFrom('collection_versions')
    .select(sql<string>`sum(version)`.as('version'))
    .where('collection', '=', collection)
    .where('user_id', '=', userId),
);

async function collectionVersion(db: Db, collection: string, userId: number): Promise<string> {
  const [row] = await versionRow(db, collection, userId);
  return String(row?.version ?? 0);
}
