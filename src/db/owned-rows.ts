import { type Kysely, sql } from 'kysely';
import type { UserRef } from '../identity/access.ts';
import type { Db } from './database.ts';
import type { ContactRow, SignatureRow, TagRow } from './schema.ts';

/**
 * Tables of rows owned by a user, with their row types. A resource added later joins by adding
 * its table here (`deleted_at` in the row type means it is soft-deleted).
 */
export interface OwnedTables {
  contacts: ContactRow;
  tags: TagRow;
  signatures: SignatureRow;
}

/** A row and its owner, as `requireReachableResource` (identity/access.ts) takes them. */
export interface Owned<Row> {
  owner: UserRef;
  row: Row;
}

const SOFT_DELETED: ReadonlySet<keyof OwnedTables> = new Set(['contacts', 'signatures']);

/**
 * Reads one live row of an owned table by id together with what the access rule needs to know
 * about its owner, in one query. Missing, deleted, or owned by a deleted user: undefined (a 404).
 * The id alone finds the row; every later statement on it also filters by its `user_id`.
 */
export async function findOwnedRow<T extends keyof OwnedTables>(db: Db, table: T, id: number): Promise<Owned<OwnedTables[T]> | undefined> {
  // The table is chosen at run time, which Kysely's types cannot follow; the result type is
  // restored from OwnedTables below.
  // biome-ignore lint/suspicious/noExplicitAny: see above
  let query = (db as unknown as Kysely<any>)
    .selectFrom(sql.table(table).as('r'))
    .innerJoin('users as u', 'u.id', 'r.user_id')
    .selectAll('r')
    .select(['u.team_id as owner_team_id', 'u.roles as owner_roles'])
    .where('r.id', '=', id)
    .where('u.deleted_at', 'is', null);
  if (SOFT_DELETED.has(table)) query = query.where('r.deleted_at', 'is', null);
  const found = await query.executeTakeFirst();
  if (!found) return undefined;
  const { owner_team_id, owner_roles, ...row } = found;
  return { owner: { id: row.user_id, team_id: owner_team_id, roles: owner_roles }, row: row as OwnedTables[T] };
}
