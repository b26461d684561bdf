import type { Db } from '../db/database.ts';
import type { OutcomeReason } from '../db/schema.ts';
import { findVoicemailTargets } from '../sending/deliveries.ts';
import { type DeliveryEvent, recordDeliveryEvents } from '../sending/delivery-events.ts';
import { isPending } from '../sending/delivery-states.ts';
import type { VoicemailProvider } from './providers.ts';

/** What a provider reported about one drop, whatever its format. */
export interface ProviderOutcome {
  /** The provider's reference of the drop (its session or message id)… */
  reference?: string;
  /** …or Hopper's delivery id, when the provider echoes it back. */
  deliveryId?: number;
  /** The provider's id of this report: the same id twice is the same report. */
  eventId: string;
  delivered: boolean;
  /** Why it failed (or a note on a delivery), in words. */
  reason: string | null;
  /** The result in Hopper's classification, with the provider's code and words (docs/outcomes.md). */
  outcome: OutcomeReason;
  occurredAt: Date;
  /** The number the provider says it called; a report naming another number is ignored. */
  phone?: string;
}

interface OutcomeResult {
  recorded: number;
  duplicates: number;
  /** Reports that match no drop of this provider (or name another number): ignored. */
  unknown: number;
  /** Reports about deliveries whose hand-over is not recorded yet: to be retried. */
  early: number;
}

/**
 * Records provider outcomes as `delivered`/`failed` delivery events (sending/delivery-events.ts:
 * each stored once by (source, event id), counters, delivery state and contact status moved in one
 * transaction). A report is matched only to a voicemail delivery of a drop sent through the same
 * provider. A report that arrives before the engine recorded the hand-over (the delivery is still
 * being sent) is not recorded but counted as `early`, so the caller can have it retried: recorded
 * now, its state change would be overwritten by the hand-over.
 */
export async function recordOutcomes(
  db: Db,
  source: string,
  provider: VoicemailProvider,
  outcomes: readonly ProviderOutcome[],
  now: Date,
): Promise<OutcomeResult> {
  const result: OutcomeResult = { recorded: 0, duplicates: 0, unknown: 0, early: 0 };
  if (outcomes.length === 0) return result;
  const references = [...new Set(outcomes.flatMap((o) => (o.reference ? [o.reference] : [])))];
  const ids = [...new Set(outcomes.flatMap((o) => (o.deliveryId !== undefined ? [o.deliveryId] : [])))];
  const rows = await findVoicemailTargets(db, provider, references, ids);
  const byReference = new Map(rows.filter((r) => r.provider_message_id !== null).map((r) => [r.provider_message_id as string, r]));
  const byId = new Map(rows.map((r) => [r.id, r]));

  const events: DeliveryEvent[] = [];
  for (const outcome of outcomes) {
    const target = outcome.deliveryId !== undefined ? byId.get(outcome.deliveryId) : byReference.get(outcome.reference ?? '');
    if (!target || (outcome.phone !== undefined && outcome.phone !== target.address)) {
      result.unknown++;
    } else if (isPending(target.state)) {
      result.early++;
    } else {
      events.push({
        source,
        eventId: outcome.eventId,
        deliveryId: target.id,
        type: outcome.delivered ? 'delivered' : 'failed',
        occurredAt: outcome.occurredAt,
        detail: outcome.reason,
        outcome: outcome.outcome,
      });
    }
  }
  const recorded = await recordDeliveryEvents(db, events, now);
  result.recorded = recorded.recorded;
  result.duplicates = recorded.duplicates;
  result.unknown += recorded.unknown;
  return result;
}
