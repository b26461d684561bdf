import { sql } from 'kysely';
import type { Db } from './database.ts';
import type { ApiKeyRow, ContactRow, MediaRow, SignatureRow, TagRow, WebhookEndpointRow } from './schema.ts';

/** What the access rule (identity/access.ts) needs to know about a row's owner. */
export interface UserRef {
  readonly id: number;
  readonly team_id: number | null;
  readonly roles: readonly string[];
}

/** A row together with its owner. */
interface Owned<Row> {
  owner: UserRef;
  row: Row;
}

/**
 * Tables of rows owned by a user, with their row types and the column that ends a row's life
 * (soft delete, revocation; none for tags, which are deleted for good). A resource added later
 * joins by adding its table here.
 */
interface OwnedTables {
  contacts: ContactRow;
  tags: TagRow;
  signatures: SignatureRow;
  media: MediaRow;
  api_keys: ApiKeyRow;
  webhook_endpoints: WebhookEndpointRow;
}

const ENDED_BY: Record<keyof OwnedTables, string | null> = {
  contacts: 'deleted_at',
  tags: null,
  signatures: 'deleted_at',
  media: 'deleted_at',
  api_keys: 'revoked_at',
  webhook_endpoints: null,
};

/**
 * Reads one live row of an owned table by id together with what the access rule needs to know
 * about its owner, in one query. Missing, ended, or owned by a deleted user: undefined (a 404).
 * The id alone finds the row; every later statement on it also filters by its `user_id`.
 */
export async function findOwnedRow<T extends keyof OwnedTables>(db: Db, table: T, id: number): Promise<Owned<OwnedTables[T]> | undefined> {
  const ended = ENDED_BY[table];
  const { rows } = await sql<OwnedTables[T] & { owner_team_id: number | null; owner_roles: string[] }>`
    SELECT r.*, u.team_id AS owner_team_id, u.roles AS owner_roles
    FROM ${sql.table(table)} r JOIN users u ON u.id = r.user_id
    WHERE r.id = ${id} AND u.deleted_at IS NULL ${ended ? sql`AND ${sql.ref(`r.${ended}`)} IS NULL` : sql``}`.execute(db);
  const found = rows[0];
  if (!found) return undefined;
  const { owner_team_id, owner_roles, ...row } = found;
  return { owner: { id: found.user_id, team_id: owner_team_id, roles: owner_roles }, row: row as unknown as OwnedTables[T] };
}
