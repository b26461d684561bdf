/** Roles in rising order of rights: a higher role includes every right of the lower ones. */
export const ROLE_NAMES = ['User', 'Team Administrator', 'Administrator'] as const;
export type RoleName = (typeof ROLE_NAMES)[number];

export const RANK = { User: 0, 'Team Administrator': 1, Administrator: 2 } as const satisfies Record<RoleName, number>;

/** The rank of the highest role held. */
export function rankOf(roles: readonly string[]): number {
  return Math.max(0, ...roles.map((role) => RANK[role as RoleName] ?? 0));
}
