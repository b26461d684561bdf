import type { RoleName } from '../db/schema.ts';

export type { RoleName };

/** Each role's rank: a higher role includes every right of the lower ones. */
export const RANK = { User: 0, 'Team Administrator': 1, Administrator: 2 } as const satisfies Record<RoleName, number>;

/** Roles in rising order of rights (every RoleName, as RANK has each). */
export const ROLE_NAMES = Object.keys(RANK) as RoleName[];

/** The rank of the highest role held. */
export function rankOf(roles: readonly string[]): number {
  return Math.max(0, ...roles.map((role) => RANK[role as RoleName] ?? 0));
}
