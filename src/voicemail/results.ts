import type { PgBoss } from 'pg-boss';
import type { Db } from '../db/database.ts';
import { findDelivery } from '../sending/deliveries.ts';
import { recordDeliveryEvents } from '../sending/delivery-events.ts';
import { isPending } from '../sending/delivery-states.ts';
import { inRealTime } from '../time.ts';
import { PROVIDER_QUEUES, sendProviderJob } from './provider-queues.ts';
import {
  type DropCowboyOutcome,
  type DropCowboyResult,
  type DropCowboyWebhookEvent,
  outcomeOf,
  readDropCowboyCallback,
} from './providers/drop-cowboy-events.ts';
import type { VoicemailProvider } from './providers.ts';
import {
  claimEvent,
  findSubmission,
  forgetEvent,
  keepReceipt,
  lockNumber,
  matchResult,
  noteEventDelivery,
  pairReceipts,
  receiptMayBeOurs,
  storeResult,
} from './submissions.ts';

/**
 * One place records a provider's result for a delivery, once, whichever channel brings it first
 * (Drop Cowboy: the per-send callback or the signed status webhook; a receipt only adds its proof
 * of delivery). The result is stored on the submission (the first one wins), then recorded as a
 * delivery event through sending/delivery-events.ts under one event id per delivery, so a second
 * channel, or a replay, is a duplicate there too.
 */
const DROPCOWBOY_SOURCE = 'dropcowboy';
const PROVIDER: VoicemailProvider = 'Drop Cowboy';

interface ResultSummary {
  recorded: number;
  duplicates: number;
  ignored: number;
}

interface ResultDeps {
  db: Db;
  boss: PgBoss;
}

/**
 * A signed Drop Cowboy webhook event (already verified). Drop Cowboy's webhooks carry no
 * `foreign_id` and no `message_id` (docs/concepts/send-results.md: "match those on `to` or
 * `contact_id`"; `contact_id` is the contact's, the same for every drop to the number), so:
 *
 * - a `contact.rvm.status` is the result: it goes to the delivery its `drop_id` was seen on (the
 *   callback echoes it with our `foreign_id`), else to the number's delivery handed over first
 *   that still waits (submissions.ts `matchResult`);
 * - a `contact.rvm.receipt` is not a result (its `drop_id` is not the status's): it is kept, and
 *   pairs with the result its status brought (`pairReceipts`), now or when that status comes;
 *   it never takes a waiting delivery.
 *
 * Everything for one number runs under one lock (`lockNumber`), so a status and a receipt arriving
 * together are matched one after the other, never split between two deliveries.
 */
export async function recordDropCowboyEvent(deps: ResultDeps, event: DropCowboyWebhookEvent, now: Date): Promise<ResultSummary> {
  const isStatus = event.event === 'contact.rvm.status';
  if ((!isStatus && event.event !== 'contact.rvm.receipt') || !event.to) return { recorded: 0, duplicates: 0, ignored: 1 };
  const to = event.to;
  const outcome = outcomeOf(event);
  // A status that says neither delivered nor failed cannot be a result: it would take a delivery for nothing.
  if (isStatus && !outcome) return { recorded: 0, duplicates: 0, ignored: 1 };
  const key = `${event.event}:${event.eventId}`;
  const stored = await deps.db.transaction().execute(async (trx) => {
    await lockNumber(trx, PROVIDER, to);
    // The event first: a replay stops here, before it could take another delivery of the number.
    if (!(await claimEvent(trx, PROVIDER, key, null, now))) return 'duplicate' as const;
    const forget = async () => {
      await forgetEvent(trx, PROVIDER, key);
      return 'unknown' as const;
    };
    if (!isStatus) {
      if (!(await receiptMayBeOurs(trx, PROVIDER, to, now))) return forget();
      await keepReceipt(
        trx,
        PROVIDER,
        {
          eventKey: key,
          phone: to,
          remoteDropId: event.dropId,
          reasonCode: event.reasonCode,
          proofUrl: event.proofUrl,
          occurredAt: event.occurredAt,
        },
        now,
      );
      await pairReceipts(trx, PROVIDER, to, now);
      return 'receipt' as const;
    }
    const target = await matchResult(trx, PROVIDER, to, event.dropId);
    if (!target || !outcome) return forget();
    await noteEventDelivery(trx, PROVIDER, key, target.delivery_id);
    const fresh = await storeResult(
      trx,
      target.delivery_id,
      resultOf(outcome, event, event.occurredAt ?? now, now),
      event.dropId ? { remoteDropId: event.dropId } : {},
    );
    // A receipt that came first waits for this status.
    await pairReceipts(trx, PROVIDER, to, now);
    return { deliveryId: target.delivery_id, fresh };
  });
  if (stored === 'duplicate') return { recorded: 0, duplicates: 1, ignored: 0 };
  if (stored === 'unknown') return { recorded: 0, duplicates: 0, ignored: 1 };
  if (stored === 'receipt') return { recorded: 0, duplicates: 0, ignored: 0 };
  const recorded = await applyResult(deps, stored.deliveryId, now);
  return { recorded, duplicates: stored.fresh ? 0 : 1, ignored: 0 };
}

type CallbackAnswer = ResultSummary | 'forbidden';

/**
 * The per-send callback: the token in its URL must be the one made for the delivery its
 * `foreign_id` names. Unsigned, so it is matched only against Hopper's own sends.
 */
export async function recordDropCowboyCallback(
  deps: ResultDeps,
  token: string,
  body: Record<string, unknown>,
  now: Date,
  sameSecret: (given: string, expected: string) => boolean,
): Promise<CallbackAnswer> {
  const callback = readDropCowboyCallback(body);
  const deliveryId = callback.foreignId && /^\d{1,15}$/.test(callback.foreignId) ? Number(callback.foreignId) : undefined;
  const submission = deliveryId === undefined ? undefined : await findSubmission(deps.db, deliveryId);
  if (!submission || submission.provider !== PROVIDER || !sameSecret(token, submission.callback_token)) return 'forbidden';
  if (callback.to && callback.to !== submission.phone) return { recorded: 0, duplicates: 0, ignored: 1 };
  const outcome = outcomeOf(callback);
  const fresh = await deps.db.transaction().execute(async (trx) => {
    await lockNumber(trx, PROVIDER, submission.phone);
    const stored = await storeResult(trx, submission.delivery_id, outcome && resultOf(outcome, callback, callback.occurredAt ?? now, now), {
      ...(callback.proofUrl ? { proofUrl: callback.proofUrl } : {}),
      ...(callback.dropId ? { remoteDropId: callback.dropId } : {}),
    });
    // A receipt that came before the result now has its result.
    await pairReceipts(trx, PROVIDER, submission.phone, now);
    return stored;
  });
  if (!outcome) return { recorded: 0, duplicates: 0, ignored: 1 };
  const recorded = await applyResult(deps, submission.delivery_id, now);
  return { recorded, duplicates: fresh ? 0 : 1, ignored: 0 };
}

function resultOf(outcome: DropCowboyOutcome, result: DropCowboyResult, occurredAt: Date, now: Date) {
  return {
    delivered: outcome.delivered,
    reasonCode: result.reasonCode ?? null,
    detail: outcome.reason,
    outcome: outcome.outcome,
    occurredAt,
    at: now,
  };
}

/**
 * Records the stored result of a delivery as its `delivered`/`failed` event (once: one event id per
 * delivery). A delivery whose hand-over the engine has not recorded yet gets a job that tries
 * again shortly. Returns 1 when the event is new.
 */
async function applyResult(deps: ResultDeps, deliveryId: number, now: Date): Promise<number> {
  const submission = await findSubmission(deps.db, deliveryId);
  if (!submission?.result_at || submission.delivered === null) return 0;
  const delivery = await findDelivery(deps.db, deliveryId);
  if (!delivery) return 0;
  if (isPending(delivery.state)) {
    await sendProviderJob(deps.boss, PROVIDER_QUEUES.result, { deliveryId }, inRealTime(1000));
    return 0;
  }
  const result = await recordDeliveryEvents(
    deps.db,
    [
      {
        source: DROPCOWBOY_SOURCE,
        eventId: `result:${deliveryId}`,
        deliveryId,
        type: submission.delivered ? 'delivered' : 'failed',
        occurredAt: submission.result_occurred_at ?? now,
        detail: submission.result_detail,
        ...(submission.result_outcome ? { outcome: submission.result_outcome } : {}),
      },
    ],
    now,
  );
  return result.recorded;
}

/** The job of a result that came early: true once it is recorded (or nothing is left to do). */
export async function applyEarlyResult(deps: ResultDeps, deliveryId: number, now: Date): Promise<boolean> {
  const delivery = await findDelivery(deps.db, deliveryId);
  if (!delivery) return true;
  if (isPending(delivery.state)) return false;
  await applyResult(deps, deliveryId, now);
  return true;
}
