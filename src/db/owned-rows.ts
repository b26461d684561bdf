import { type Expression, sql } from 'kysely';
import type { Db } from './database.ts';

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
 * Reads one row of a table whose rows a user owns, together with what the access rule needs to
 * know about its owner, in one query. The table's module writes the read of its own row — by id,
 * rows whose life ended (soft deleted, revoked) left out — and this adds the owner's part: the
 * user, a deleted one reading as no row at all (a 404). The id alone finds the row; every later
 * statement on it also filters by its `user_id`. PostgreSQL pulls the row's select up into the
 * join: the plan is that of one indexed join.
 */
export async function findOwnedRow<Row extends { user_id: number }>(db: Db, row: Expression<Row>): Promise<Owned<Row> | undefined> {
  const { rows } = await sql<Row & { owner_team_id: number | null; owner_roles: string[] }>`
    SELECT r.*, u.team_id AS owner_team_id, u.roles AS owner_roles
    FROM (${row}) r JOIN users u ON u.id = r.user_id
    WHERE u.deleted_at IS NULL`.execute(db);
  const found = rows[0];
  if (!found) return undefined;
  const { owner_team_id, owner_roles, ...own } = found;
  return { owner: { id: found.user_id, team_id: owner_team_id, roles: owner_roles }, row: own as unknown as Row };
}
