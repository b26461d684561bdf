import { type RawBuilder, sql } from 'kysely';

/**
 * The claim protocol of the two delivery ledgers, messages' (sending/deliveries.ts) and webhooks'
 * (webhooks/deliveries.ts), whose statements stay each in its table's module:
 *
 * - a worker claims due rows `FOR UPDATE SKIP LOCKED`, so any number of workers share them and
 *   each row is claimed by one; a claimed row is `sending`, with a lease (`lease_until`);
 * - a `sending` row whose lease ran out belongs to a worker that died, and is claimed again;
 * - `attempts` is a claim's fencing token: every claim increments it, so a write conditioned on it
 *   (`stillClaimed`) applies only while that claim is the current one — a worker that stalled past
 *   its lease cannot record over the claim that replaced it;
 * - a claim handed back unsent (`released`) takes its attempt back: the attempt did not happen.
 *
 * The statements name the ledger's table `d`.
 */
export interface Claim {
  readonly id: number;
  readonly attempts: number;
}

/** When a lease taken (or renewed) at `now` runs out. */
export function leaseEnd(now: Date, leaseMs: number): Date {
  return new Date(now.getTime() + leaseMs);
}

/** Claims as rows `x(id, attempts)`, for an UPDATE's FROM. */
export function claimRows(claims: readonly Claim[]): RawBuilder<unknown> {
  return sql`unnest(${claims.map((c) => c.id)}::bigint[], ${claims.map((c) => c.attempts)}::integer[]) AS x(id, attempts)`;
}

/** A row of `d` is still the claim of its row in `x`. */
export const stillClaimed = sql`d.id = x.id AND d.attempts = x.attempts`;

/** The SET of claims handed back unsent: `to` (due again, or cancelled), no lease, the attempt taken back unless `counted`. */
export function released(to: string, now: Date, counted = false): RawBuilder<unknown> {
  return sql`state = ${to}, lease_until = NULL, updated_at = ${now}, attempts = d.attempts - ${counted ? 0 : 1}::integer`;
}
