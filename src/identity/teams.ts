import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import type { TeamRow } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { DomainError, notFound } from '../errors.ts';
import { Id, Timestamp, WritableBody } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';
import { canSeeTeam, type Principal, requireRank, visibleTeams } from './access.ts';
import { RANK } from './roles.ts';

/** Teams: Administrators create and see all; everyone else sees their own team. */

export const Team = Type.Object({ id: Id, name: Type.String(), created_at: Timestamp, updated_at: Timestamp });
export const TeamBody = WritableBody({ name: Type.String({ minLength: 1, maxLength: 255 }) }, ['id', 'created_at', 'updated_at']);
export const TEAM_FILTERS: Filters = { id: { kind: 'id', column: 'id' }, name: { kind: 'text', column: 'name' } };

export function toApiTeam(row: TeamRow) {
  return { id: row.id, name: row.name, created_at: formatTimestamp(row.created_at), updated_at: formatTimestamp(row.updated_at) };
}

export async function createTeam(db: Db, principal: Principal, name: string, now: Date): Promise<TeamRow> {
  requireRank(principal, RANK.Administrator, 'create teams');
  return db.insertInto('teams').values({ name, created_at: now, updated_at: now }).returningAll().executeTakeFirstOrThrow();
}

export async function teamExists(db: Db, id: number): Promise<boolean> {
  return (await db.selectFrom('teams').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
}

/** The teams `principal` may see, filtered by `TEAM_FILTERS`. */
export function searchTeams(db: Db, principal: Principal, params: SearchParams) {
  return runSearch(db.selectFrom('teams').selectAll().where(visibleTeams(principal)), TEAM_FILTERS, params, 'id');
}

export async function findVisibleTeam(db: Db, principal: Principal, id: number): Promise<TeamRow> {
  const row = await db.selectFrom('teams').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound('Team', id);
  if (!canSeeTeam(principal, id)) throw new DomainError('forbidden', `You may not access team ${id}.`);
  return row;
}
