import { type RawBuilder, sql } from 'kysely';
import type { DeliveryState } from '../db/schema.ts';

/**
 * The states of a delivery, the groups of them the code moves and reads, and their ranks — each
 * written once. SQL gets a group as literals (`state IN ('queued', 'deferred', 'held')`), never as
 * a parameter: the planner uses a partial index only when the statement's condition implies the
 * index's own (`deliveries_claim_idx … WHERE state IN ('queued', 'deferred', 'held')`, migration
 * 0006), which it can tell from literals alone.
 *
 * A delivery moves queued → sending → sent (→ delivered, bounced, …), or deferred/held → … , or
 * failed/cancelled; `skipped` is a contact that shares another's address (sending/deliveries.ts).
 * Later outcomes win over earlier ones whatever order their events arrive in: each state's rank
 * (delivered 2; bounced, dropped and failed 3; every other 1) says which.
 */
const RANKS = {
  queued: 1,
  sending: 1,
  deferred: 1,
  held: 1,
  sent: 1,
  delivered: 2,
  bounced: 3,
  dropped: 3,
  failed: 3,
  cancelled: 1,
  skipped: 1,
} as const satisfies Record<DeliveryState, number>;

/** Every state, in the order the deliveries listing shows them. */
export const DELIVERY_STATES = Object.keys(RANKS) as DeliveryState[];

/** Due to be handed over when their time comes: what a claim takes (the claim index's states). */
export const CLAIMABLE_STATES = ['queued', 'deferred', 'held'] as const satisfies readonly DeliveryState[];
/** Still to be handed over: the message is not finished while any remain. */
export const PENDING_STATES = ['queued', 'sending', 'deferred', 'held'] as const satisfies readonly DeliveryState[];
/** Given up: a message whose deliveries all end so has failed. */
export const FAILED_STATES = ['failed', 'bounced', 'dropped'] as const satisfies readonly DeliveryState[];
/** The sending engine's own: an event does not move them (the engine counts their outcome itself). */
export const ENGINE_STATES = ['queued', 'sending'] as const satisfies readonly DeliveryState[];
/** What a provider may still hold: tried with no answer yet (a lost reply), or being handed over. */
export const MAYBE_WITH_PROVIDER_STATES = ['sending', 'deferred'] as const satisfies readonly DeliveryState[];
/** Handed over, or being handed over: what a provider may hold under an id of its own (stopped when its message is). */
export const HANDED_OVER_STATES = ['sent', 'sending'] as const satisfies readonly DeliveryState[];
/** Given up, or waiting after a temporary failure: the errors `/metrics` counts by source and class. */
export const ERROR_STATES = [...FAILED_STATES, 'deferred'] as const satisfies readonly DeliveryState[];

export function stateRank(state: DeliveryState): number {
  return RANKS[state];
}

export function isPending(state: string): boolean {
  return (PENDING_STATES as readonly string[]).includes(state);
}

/** A group of states as SQL literals, for `state IN (…)`. */
export function stateList(states: readonly DeliveryState[]): RawBuilder<unknown> {
  return sql.raw(states.map((state) => `'${state}'`).join(', '));
}

/** The rank of the state in `column`, in SQL: `CASE d.state WHEN 'delivered' THEN 2 … ELSE 1 END`. */
export function rankSql(column: string): RawBuilder<number> {
  const ranked = Object.entries(RANKS).filter(([, rank]) => rank !== 1);
  return sql<number>`(CASE ${sql.ref(column)} ${sql.raw(ranked.map(([state, rank]) => `WHEN '${state}' THEN ${rank}`).join(' '))} ELSE 1 END)`;
}
