import { HttpError } from '../http/problems.ts';
import { RANK, rankOf } from './roles.ts';

/** Who is calling: the user behind the API key (or session) of this request. */
export interface Principal {
  readonly userId: number;
  readonly teamId: number | null;
  readonly rank: number;
  readonly keyId: number | null;
}

export interface UserRef {
  readonly id: number;
  readonly team_id: number | null;
  readonly roles: readonly string[];
}

/**
 * The one access rule. A User reaches only themself; a Team Administrator also reaches the users
 * of their team whose role is no higher than their own (so a key can never be minted for a more
 * powerful teammate); an Administrator reaches everyone.
 */
export function canReach(principal: Principal, target: UserRef): boolean {
  if (principal.rank >= RANK.Administrator || target.id === principal.userId) return true;
  return (
    principal.rank >= RANK['Team Administrator'] &&
    principal.teamId !== null &&
    target.team_id === principal.teamId &&
    rankOf(target.roles) <= principal.rank
  );
}

/**
 * For `/users/{id}/…`: a user the caller may not reach is 403, and so is an id that does not
 * exist (nobody learns which ids exist) — except for Administrators, who get an honest 404.
 */
export function requireReachableUser<T extends UserRef>(principal: Principal, target: T | undefined, id: number): T {
  if (target && canReach(principal, target)) return target;
  if (!target && principal.rank >= RANK.Administrator) throw new HttpError('not_found', `User ${id} does not exist.`);
  throw new HttpError('forbidden', `You may not access user ${id}.`);
}

/** For `/<resource>/{id}`: missing or deleted is 404; owned by someone the caller may not reach is 403. */
export function requireReachableResource<T>(
  principal: Principal,
  found: { owner: UserRef; row: T } | undefined,
  what: string,
  id: number,
): T {
  if (!found) throw new HttpError('not_found', `${what} ${id} does not exist.`);
  if (!canReach(principal, found.owner)) throw new HttpError('forbidden', `You may not access ${what.toLowerCase()} ${id}.`);
  return found.row;
}

export function requireRank(principal: Principal, minimum: number, action: string): void {
  if (principal.rank < minimum) throw new HttpError('forbidden', `Your role does not allow you to ${action}.`);
}
