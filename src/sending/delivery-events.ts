import { sql } from 'kysely';
import { type ContactChange, changeContactsByOutcome } from '../contacts/contacts.ts';
import type { Db } from '../db/database.ts';
import type { ContactStatus, DeliveryEventRow, DeliveryFacts, DeliveryState, OutcomeReason } from '../db/schema.ts';
import { addToCounters, COUNTER_SHARDS, COUNTERS, type Counter, type CounterSums } from '../messages/reporting.ts';
import { countSoftBounces, deferClaim, raiseDeliveryStates, transitionDelivery } from './deliveries.ts';
import { stateRank } from './delivery-states.ts';
import { recordedOutcome } from './outcomes.ts';

/**
 * The one recorder of outcomes: what happened to a delivery, from any source — the sending
 * engine's own hand-over that did not end `sent` (`recordHandOver`: a relay's 5xx, a provider's
 * refusal, a retry, a give-up), and everything after it (`recordDeliveryEvents`): SendGrid's, SES's
 * and Postmark's webhooks, the inbound mail receiver (replies, bounces, complaints, mailed
 * unsubscribes), a voicemail provider's disposition, Hopper's own open pixel, click redirect and
 * unsubscribe link. The sources say what happened (a bounce, permanent or not; a complaint); what
 * that makes of the delivery, its message's counters and its contact is decided here (`EFFECTS`),
 * and written in one transaction: a connection lost half-way leaves nothing half-done, and the
 * retry does it all. Each event is stored once (by its source's id), and only a newly stored event
 * moves counters, the delivery's state and the contact's status, so a replayed batch changes
 * nothing and the counters stay exactly the ledger.
 */
const EVENT_TYPES = [
  'processed',
  'delivered',
  'deferred',
  'dropped',
  'hard_bounce',
  'soft_bounce',
  'temporary_bounce',
  'failed',
  'open',
  'click',
  'spamreport',
  'unsubscribe',
  'reply',
] as const;
export type DeliveryEventType = (typeof EVENT_TYPES)[number];

export interface DeliveryEvent {
  /** Who reported it: `sendgrid`, `slybroadcast`, `hopper` (tracking), … */
  source: string;
  /** The source's id of the event; the same id twice is the same event. */
  eventId: string;
  deliveryId: number;
  /**
   * The address or number the source says the event is about. When given, it must be the
   * delivery's (case aside), or the event is treated as one for an unknown delivery: a provider
   * account shared by two Hopper installations reports both one's deliveries to each.
   */
  address?: string | null;
  type: DeliveryEventType;
  occurredAt: Date;
  /** Free text kept with the event: a bounce reason, a clicked URL. */
  detail?: string | null;
  /**
   * Why the delivery ended so, in Hopper's terms and the provider's (docs/outcomes.md): kept on the
   * delivery when this event decides its state, and, with `suppress`, it stops the contact's
   * address or number from receiving again.
   */
  outcome?: OutcomeReason;
}

interface Effect {
  counters: Partial<Record<Counter, number>>;
  /** The delivery's new state, applied only when it ranks above the current one (events arrive out of order). */
  state?: DeliveryState;
  contactStatus?: Exclude<ContactStatus, 'Subscribed'>;
}

const EFFECTS: Record<DeliveryEventType, Effect> = {
  processed: { counters: { processed: 1 } },
  delivered: { counters: { delivered: 1 }, state: 'delivered' },
  deferred: { counters: { deferred: 1 } },
  dropped: { counters: { dropped: 1 }, state: 'dropped' },
  hard_bounce: { counters: { bounce: 1, hard_bounce: 1 }, state: 'bounced', contactStatus: 'Inactive - Hard Bounce' },
  soft_bounce: { counters: { bounce: 1, soft_bounce: 1 }, state: 'bounced' },
  // A delay notice (DSN 4.x.x): the relay still tries; the delivery is not bounced.
  temporary_bounce: { counters: { soft_bounce: 1 } },
  failed: { counters: { failed: 1 }, state: 'failed' },
  open: { counters: { open: 1 } },
  click: { counters: { click: 1 } },
  spamreport: { counters: { spamreport: 1 }, contactStatus: 'Inactive - Spam Complaint' },
  unsubscribe: { counters: { unsubscribe: 1 }, contactStatus: 'Unsubscribed' },
  reply: { counters: { reply: 1 } },
};

interface RecordResult {
  recorded: number;
  duplicates: number;
  /** Events naming no known delivery, or another address than the delivery's (ignored). */
  unknown: number;
}

/** A newly stored event with what it is about: its delivery's message, owner and contact. */
type Fresh = Pick<DeliveryEventRow, 'delivery_id' | 'occurred_at' | 'source' | 'event_id'> & { type: DeliveryEventType } & Omit<
    DeliveryFacts,
    'id' | 'address'
  > & { outcome?: OutcomeReason; detail?: string | null };

/**
 * Stores a batch of events and applies what each new one means, in one transaction of four
 * set-based statements however large the batch.
 *
 * Concurrent batches (SendGrid posts many at once, and retries) must neither deadlock nor queue
 * behind each other. Every transaction takes its row locks in one global order — event keys
 * sorted, then deliveries by id, then counter rows sorted, then contacts by id — the same order as
 * the sending engine (a delivery, then its counter row). And a batch adds its counts to one shard
 * row per message chosen at random, so two batches about the same message mostly touch different
 * counter rows instead of waiting for each other's commit.
 */
export async function recordDeliveryEvents(db: Db, events: readonly DeliveryEvent[], now: Date): Promise<RecordResult> {
  if (events.length === 0) return { recorded: 0, duplicates: 0, unknown: 0 };
  const rows = events.map((e) => ({
    source: e.source,
    event_id: e.eventId,
    delivery_id: e.deliveryId,
    address: e.address ?? null,
    type: e.type,
    occurred_at: e.occurredAt.toISOString(),
    detail: e.detail ?? null,
  }));

  return db.transaction().execute(async (trx) => {
    // New events only: the join drops events for deliveries that do not exist (or another address),
    // DISTINCT ON folds repeats inside the batch, ON CONFLICT skips events already stored.
    const { rows: result } = await sql<{ matched: string; fresh: (Omit<Fresh, 'occurred_at'> & { occurred_at: string })[] | null }>`
      WITH incoming AS (
        SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
          AS x(source text, event_id text, delivery_id bigint, address text, type text, occurred_at timestamptz, detail text)
      ), matched AS (
        SELECT i.* FROM incoming i JOIN deliveries d ON d.id = i.delivery_id
        WHERE i.address IS NULL OR lower(i.address) = lower(d.address)
      ), stored AS (
        INSERT INTO delivery_events (source, event_id, delivery_id, type, occurred_at, detail, received_at)
        SELECT DISTINCT ON (source, event_id) source, event_id, delivery_id, type, occurred_at, detail, ${now}::timestamptz
        FROM matched
        ORDER BY source, event_id
        ON CONFLICT (source, event_id) DO NOTHING
        RETURNING source, event_id, delivery_id, type, occurred_at
      )
      SELECT (SELECT count(*) FROM matched) AS matched,
             (SELECT json_agg(json_build_object(
                       'source', s.source, 'event_id', s.event_id,
                       'delivery_id', s.delivery_id, 'type', s.type, 'occurred_at', s.occurred_at, 'user_id', d.user_id,
                       'message_kind', d.message_kind, 'message_id', d.message_id, 'contact_id', d.contact_id))
              FROM stored s JOIN deliveries d ON d.id = s.delivery_id) AS fresh`.execute(trx);
    const matched = Number(result[0]?.matched ?? 0);
    const given = new Map(events.map((e) => [`${e.source}\u0000${e.eventId}`, e]));
    const fresh = (result[0]?.fresh ?? []).map((e) => {
      const event = given.get(`${e.source}\u0000${e.event_id}`);
      return { ...e, occurred_at: new Date(e.occurred_at), outcome: event?.outcome, detail: event?.detail ?? null };
    });
    if (fresh.length > 0) {
      const moves = await moveStates(trx, fresh, now);
      await addCounters(trx, fresh.filter(counts(moves)));
      await changeContacts(trx, fresh, now);
    }
    return { recorded: fresh.length, duplicates: matched - fresh.length, unknown: events.length - matched };
  });
}

const BOUNCES = new Set<DeliveryEventType>(['hard_bounce', 'soft_bounce']);

/** An outcome's reason with who gave it (`smtp`, a voicemail provider's name). */
type SourcedReason = OutcomeReason & { source: string };

/**
 * What the engine's hand-over of one claimed delivery came to, when not `sent` (send-batch.ts):
 * not to be sent any more, held to a later time, to be tried again at `at` (`throttled`: the
 * provider asked the sender as a whole to wait, so the attempt is taken back), or failed for good —
 * a bounce when the relay refused the address or the message (`outcome.permanent` when the address
 * itself is bad), or a failure after the last of its retries (`gaveUp`).
 */
export type HandOverResult =
  | { kind: 'cancelled'; reason: string }
  | { kind: 'held'; until: Date; reason: string }
  | { kind: 'retry'; at: Date; error: string }
  | { kind: 'throttled'; at: Date; error: string; refused: boolean }
  | { kind: 'failed'; error: string; bounce: boolean; gaveUp: boolean; outcome?: SourcedReason };

type HandedDelivery = Pick<DeliveryFacts, 'id' | 'user_id' | 'message_kind' | 'message_id' | 'contact_id'> & { attempts: number };

/**
 * Records the engine's result for a delivery it holds (`sending`, this claim's attempt): the
 * delivery's state, its counters and, for a failure, its contact — a hard bounce retires the
 * address, soft bounces may repeat into `Inactive - Repeated Soft Bounce`, a voicemail outcome
 * may suppress the number — in one transaction, with the same effects as the events' (`EFFECTS`).
 * False when the claim was no longer current (another worker took it over): nothing changes.
 */
export async function recordHandOver(db: Db, delivery: HandedDelivery, result: HandOverResult, now: Date): Promise<boolean> {
  const claim = { id: delivery.id, attempts: delivery.attempts };
  switch (result.kind) {
    case 'cancelled':
      return transitionDelivery(db, claim, ['sending'], 'cancelled', { last_error: result.reason }, {}, now);
    case 'held':
      return transitionDelivery(db, claim, ['sending'], 'held', { next_attempt_at: result.until, last_error: result.reason }, {}, now);
    case 'retry':
      return transitionDelivery(
        db,
        claim,
        ['sending'],
        'deferred',
        { next_attempt_at: result.at, last_error: result.error },
        { deferred: 1 },
        now,
      );
    case 'throttled':
      return deferClaim(db, claim, result.at, result.error, result.refused, now);
    case 'failed': {
      // A bounce is hard when the address itself is bad (docs/outcomes.md); only an email bounces.
      const hard = result.bounce && delivery.message_kind === 'templated_email' && result.outcome?.permanent === true;
      const type: DeliveryEventType = result.bounce ? (hard ? 'hard_bounce' : 'soft_bounce') : 'failed';
      const effect = EFFECTS[type];
      const counters = { ...effect.counters, failed: 1, ...(result.gaveUp ? { deferred: 1 } : {}) };
      const outcome = result.outcome ? { outcome: recordedOutcome(result.outcome, result.outcome.source, now) } : {};
      return db.transaction().execute(async (trx) => {
        const moved = await transitionDelivery(
          trx,
          claim,
          ['sending'],
          effect.state as DeliveryState,
          { last_error: result.error, ...outcome },
          counters,
          now,
        );
        if (moved && !result.gaveUp) {
          const event: Fresh = {
            delivery_id: delivery.id,
            user_id: delivery.user_id,
            message_kind: delivery.message_kind,
            message_id: delivery.message_id,
            contact_id: delivery.contact_id,
            source: result.outcome?.source ?? 'hopper',
            event_id: `${type}:${delivery.id}`,
            type,
            occurred_at: now,
            outcome: result.outcome,
            detail: result.error,
          };
          await changeContacts(trx, [event], now);
        }
        return moved;
      });
    }
  }
}

/** What moving the states did: the event that decided each delivery's new state, and which moved. */
interface Moves {
  decided: Map<number, Fresh>;
  moved: Set<number>;
  /** Deliveries the sending engine still holds (queued, sending): their states are its to move. */
  held: Set<number>;
}

/**
 * Which fresh events count. A delivery bounces once, however many report it: the relay's SMTP
 * answer, SendGrid, SES or Postmark, and the DSN mailed to its VERP address may all tell of the
 * same bounce, each under an event id of its own. So a bounce counts only when it is the event that
 * moved its delivery to `bounced` (or when the engine still holds the delivery, as before). Every
 * other event counts once per source event, as deduplicated on storing.
 */
function counts(moves: Moves): (event: Fresh) => boolean {
  return (event) =>
    !BOUNCES.has(event.type) ||
    moves.held.has(event.delivery_id) ||
    (moves.moved.has(event.delivery_id) && moves.decided.get(event.delivery_id) === event);
}

async function moveStates(trx: Db, fresh: Fresh[], now: Date): Promise<Moves> {
  // The highest-ranked new state per delivery (and when it happened, for delivered_at).
  const target = new Map<number, { state: DeliveryState; at: Date; event: Fresh }>();
  for (const event of fresh) {
    const state = EFFECTS[event.type].state;
    if (!state) continue;
    const current = target.get(event.delivery_id);
    if (!current || stateRank(state) > stateRank(current.state)) {
      target.set(event.delivery_id, { state, at: event.occurred_at, event });
    }
  }
  const moves: Moves = { decided: new Map([...target].map(([id, t]) => [id, t.event])), moved: new Set(), held: new Set() };
  if (target.size === 0) return moves;
  const changes = [...target].map(([id, { state, at, event }]) => ({
    id,
    state,
    rank: stateRank(state),
    at: at.toISOString(),
    outcome: event.outcome ? recordedOutcome(event.outcome, event.source, at) : null,
    // A provider's failure of a voicemail says why in words too (an email's bounce keeps its own).
    error: state === 'failed' && event.message_kind === 'voicemail_drop' ? (event.detail ?? null) : null,
  }));
  const { moved, held } = await raiseDeliveryStates(trx, changes, now);
  for (const id of moved) moves.moved.add(id);
  for (const id of held) moves.held.add(id);
  return moves;
}

async function addCounters(trx: Db, fresh: Fresh[]): Promise<void> {
  const shard = Math.floor(Math.random() * COUNTER_SHARDS);
  const sums = new Map<string, CounterSums>();
  for (const event of fresh) {
    const key = `${event.message_kind}:${event.message_id}`;
    let sum = sums.get(key);
    if (!sum) {
      sum = { message_kind: event.message_kind, message_id: event.message_id, shard, user_id: event.user_id, ...zeroCounters() };
      sums.set(key, sum);
    }
    for (const [counter, n] of Object.entries(EFFECTS[event.type].counters)) sum[counter as Counter] += n;
  }
  await addToCounters(trx, [...sums.values()]);
}

async function changeContacts(trx: Db, fresh: Fresh[], now: Date): Promise<void> {
  // A contact that unsubscribed, complained or bounced stays so: only a Subscribed contact changes,
  // and of several such events in one batch the earliest decides, as if they had come one by one.
  // Likewise a number already suppressed keeps its first reason.
  const first = new Map<string, ContactChange>();
  for (const event of fresh) {
    const status = EFFECTS[event.type].contactStatus;
    const phoneReason = event.message_kind === 'voicemail_drop' && event.outcome?.suppress ? event.outcome.classification : undefined;
    if (!status && !phoneReason) continue;
    const key = `${event.contact_id}:${status ? 'email' : 'phone'}`;
    const seen = first.get(key);
    if (seen && seen.at.getTime() <= event.occurred_at.getTime()) continue;
    first.set(key, {
      contact_id: event.contact_id,
      user_id: event.user_id,
      ...(status ? { status } : { phone_reason: phoneReason }),
      at: event.occurred_at,
      delivery_id: event.delivery_id,
      description: event.outcome?.description ?? event.detail ?? null,
    });
  }
  const softBounces = fresh
    .filter((e) => e.type === 'soft_bounce' && e.message_kind === 'templated_email')
    .map((e) => ({
      contact_id: e.contact_id,
      user_id: e.user_id,
      delivery_id: e.delivery_id,
      at: e.occurred_at,
      description: e.outcome?.description ?? e.detail ?? e.outcome?.classification ?? null,
    }));
  for (const change of await repeatedSoftBounces(trx, softBounces)) {
    const seen = first.get(`${change.contact_id}:email`);
    if (!seen || seen.at.getTime() > change.at.getTime()) first.set(`${change.contact_id}:email`, change);
  }
  await changeContactsByOutcome(trx, [...first.values()], now);
}

/**
 * Repeated soft bounces (docs/outcomes.md): an email address whose deliveries bounced softly
 * `SOFT_BOUNCE_LIMIT` times within `SOFT_BOUNCE_DAYS` days — each a different email, the last one
 * now — stops receiving as `Inactive - Repeated Soft Bounce`, with the delivery that made it so and
 * its words. A delay notice is not counted (the server still tries), nor are two reports of one
 * delivery's bounce. For the soft bounces just recorded (inbound DSNs, relay webhooks, the relay's
 * own answer: recordHandOver), the changes of the contacts that reached the limit.
 */
const SOFT_BOUNCE_LIMIT = 3;
const SOFT_BOUNCE_DAYS = 7;

interface SoftBounce {
  contact_id: number;
  user_id: number;
  delivery_id: number;
  at: Date;
  description: string | null;
}

async function repeatedSoftBounces(trx: Db, bounces: readonly SoftBounce[]): Promise<ContactChange[]> {
  const latest = new Map<number, SoftBounce>();
  for (const bounce of bounces) {
    const seen = latest.get(bounce.contact_id);
    if (!seen || seen.at.getTime() < bounce.at.getTime()) latest.set(bounce.contact_id, bounce);
  }
  if (latest.size === 0) return [];
  const counts = await countSoftBounces(
    trx,
    [...latest.values()].map((b) => ({
      contact_id: b.contact_id,
      since: new Date(b.at.getTime() - SOFT_BOUNCE_DAYS * 86_400_000).toISOString(),
      until: b.at.toISOString(),
    })),
  );
  return [...latest.values()]
    .filter((b) => (counts.get(b.contact_id) ?? 0) >= SOFT_BOUNCE_LIMIT)
    .map((b) => ({
      contact_id: b.contact_id,
      user_id: b.user_id,
      status: 'Inactive - Repeated Soft Bounce' as const,
      at: b.at,
      delivery_id: b.delivery_id,
      description:
        `${counts.get(b.contact_id)} soft bounces in ${SOFT_BOUNCE_DAYS} days, the last: ${b.description ?? 'soft bounce'}`.slice(0, 500),
    }));
}

function zeroCounters(): Record<Counter, number> {
  return Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Record<Counter, number>;
}

/** Events received, by source and type, for /metrics. */
export async function countDeliveryEvents(db: Db): Promise<{ source: string; type: string; n: number }[]> {
  const { rows } = await sql<{ source: string; type: string; n: string }>`
    SELECT source, type, count(*) AS n FROM delivery_events GROUP BY 1, 2`.execute(db);
  return rows.map((row) => ({ ...row, n: Number(row.n) }));
}
