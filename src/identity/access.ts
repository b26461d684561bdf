import { type ExpressionBuilder, type ExpressionWrapper, type SqlBool, sql } from 'kysely';
import type { UserRef } from '../db/owned-rows.ts';
import type { Database, UserRow } from '../db/schema.ts';
import { DomainError, notFound } from '../errors.ts';
import { RANK, ROLE_NAMES, rankOf } from './roles.ts';

/** Who is calling: the user behind the API key (or session) of this request. */
export interface Principal {
  readonly userId: number;
  readonly teamId: number | null;
  readonly rank: number;
  readonly keyId: number | null;
  /**
   * The caller's own user row, when authentication read it (API keys: kept with the key in the
   * principal cache, forgotten on every change of a user). Routes acting for the caller use it
   * instead of reading the row again (http/owner.ts).
   */
  readonly user?: UserRow;
}

/**
 * The one access rule, in two strengths. A User reaches only themself; an Administrator reaches
 * everyone; a Team Administrator also reaches the users of their team whose role is no higher
 * than their own (`read`: so a key can never be minted for a more powerful teammate) — and
 * manages (`manage`: changes their account, revokes their keys) only those of a strictly lower
 * role, so they can neither take over nor demote a peer. `reachableUsers` below is the `read`
 * rule as SQL, for listings.
 */
function allows(principal: Principal, target: UserRef, strength: 'read' | 'manage'): boolean {
  if (principal.rank >= RANK.Administrator || target.id === principal.userId) return true;
  if (principal.rank < RANK['Team Administrator'] || principal.teamId === null || target.team_id !== principal.teamId) return false;
  const rank = rankOf(target.roles);
  return strength === 'read' ? rank <= principal.rank : rank < principal.rank;
}

/**
 * A user's own rights, with nobody asking: what an endpoint they made may hear (webhooks), checked
 * with the same rule as a request of theirs would be.
 */
export function rightsOf(user: UserRef): Principal {
  return { userId: user.id, teamId: user.team_id, rank: rankOf(user.roles), keyId: null };
}

function canReach(principal: Principal, target: UserRef): boolean {
  return allows(principal, target, 'read');
}

export function requireManageable(principal: Principal, target: UserRef, action: string): void {
  if (!allows(principal, target, 'manage')) {
    throw new DomainError(
      'forbidden',
      `You may not ${action} of user ${target.id}: only the user, an Administrator, or a Team Administrator for a teammate of a lower role may.`,
    );
  }
}

/** `canReach` as a condition on the `users` table: the users a listing may show the caller. */
export function reachableUsers(principal: Principal) {
  return (eb: ExpressionBuilder<Database, 'users'>): ExpressionWrapper<Database, 'users', SqlBool> | ReturnType<typeof sql<SqlBool>> => {
    if (principal.rank >= RANK.Administrator) return sql<SqlBool>`true`;
    if (principal.rank < RANK['Team Administrator'] || principal.teamId === null) return eb('id', '=', principal.userId);
    const higher = ROLE_NAMES.filter((role) => RANK[role] > principal.rank);
    return eb.or([
      eb('id', '=', principal.userId),
      eb.and([eb('team_id', '=', principal.teamId), sql<SqlBool>`NOT (roles && ${sql.val(higher)}::text[])`]),
    ]);
  };
}

/**
 * The `manage` rule as a condition on the `users` table: the users whose account the caller may
 * manage (themself; for a Team Administrator, the teammates of a strictly lower role).
 */
export function manageableUsers(principal: Principal) {
  return (eb: ExpressionBuilder<Database, 'users'>): ExpressionWrapper<Database, 'users', SqlBool> | ReturnType<typeof sql<SqlBool>> => {
    if (principal.rank >= RANK.Administrator) return sql<SqlBool>`true`;
    if (principal.rank < RANK['Team Administrator'] || principal.teamId === null) return eb('id', '=', principal.userId);
    const peersOrHigher = ROLE_NAMES.filter((role) => RANK[role] >= principal.rank);
    return eb.or([
      eb('id', '=', principal.userId),
      eb.and([eb('team_id', '=', principal.teamId), sql<SqlBool>`NOT (roles && ${sql.val(peersOrHigher)}::text[])`]),
    ]);
  };
}

/** Teams: an Administrator sees every team, anyone else their own. */
export function canSeeTeam(principal: Principal, teamId: number): boolean {
  return principal.rank >= RANK.Administrator || principal.teamId === teamId;
}

/** `canSeeTeam` as a condition on the `teams` table. */
export function visibleTeams(principal: Principal) {
  return (eb: ExpressionBuilder<Database, 'teams'>) =>
    principal.rank >= RANK.Administrator ? sql<SqlBool>`true` : eb('id', '=', principal.teamId ?? 0);
}

/**
 * For `/users/{id}/…`: a user the caller may not reach is refused, and so is an id that does not
 * exist (nobody learns which ids exist) — except for Administrators, who are told it is missing.
 */
export function requireReachableUser<T extends UserRef>(principal: Principal, target: T | undefined, id: number): T {
  if (target && canReach(principal, target)) return target;
  if (!target && principal.rank >= RANK.Administrator) throw notFound('User', id);
  throw new DomainError('forbidden', `You may not access user ${id}.`);
}

/**
 * For `/<resource>/{id}`: missing or deleted is not found; owned by someone the caller may not
 * reach is forbidden. Returns what was found (a row with its owner, or a message read).
 */
export function requireReachable<T extends { owner: UserRef }>(principal: Principal, found: T | undefined, what: string, id: number): T {
  if (!found) throw notFound(what, id);
  if (!canReach(principal, found.owner)) throw new DomainError('forbidden', `You may not access ${what.toLowerCase()} ${id}.`);
  return found;
}

export function requireRank(principal: Principal, minimum: number, action: string): void {
  if (principal.rank < minimum) throw new DomainError('forbidden', `Your role does not allow you to ${action}.`);
}
