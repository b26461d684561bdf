import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { MessageKind } from '../messages/kinds.ts';
import { messageStatus } from '../messages/message-states.ts';
import { COUNTER_SHARDS } from '../messages/reporting.ts';
import type { Clock } from '../time.ts';
import type { Channel, DeliveryOutcome } from './channel.ts';
import {
  type Claim,
  type ClaimedDelivery,
  recordSent,
  releaseClaims,
  renewLeases,
  type SentDelivery,
  transitionDelivery,
} from './deliveries.ts';

/** How one batch is worked through; see EngineSettings for each. */
export interface BatchSettings {
  sendConcurrency: number;
  recordEvery: number;
  leaseMs: number;
  statusCheckMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  maxAttempts: number;
}

export interface BatchContext {
  db: Db;
  clock: Clock;
  log: FastifyBaseLogger;
  settings: BatchSettings;
  kind: MessageKind;
  messageId: number;
  channel: Channel;
  prepared: unknown;
  /** True once the worker is stopping: nothing more is handed over. */
  stopping: () => boolean;
}

/** How a batch ended: every delivery handed over, or cut short by a cancel or by the worker stopping. */
export type BatchEnd = 'done' | 'cancelled' | 'stopped';

/**
 * Hands a batch of claimed deliveries to the channel, `sendConcurrency` at a time, and records
 * each outcome. `sent` outcomes — nearly all of them — are recorded `recordEvery` at a time in one
 * statement; other outcomes at once, one by one.
 *
 * While the batch runs, the message's status is read every `statusCheckMs` (a cancel stops the
 * batch: what was not handed over yet is cancelled) and the batch's leases are renewed every third
 * of a lease, so a slow provider never lets another worker take over claims that are still alive.
 *
 * The duplicate window (docs/sending.md): a delivery the provider accepted is recorded at most
 * `2 × recordEvery` outcomes later — the lanes wait when that many are unrecorded — so a crash can
 * leave at most `2 × recordEvery + sendConcurrency` accepted-but-unrecorded deliveries per batch.
 */
export async function sendBatch(ctx: BatchContext, batch: readonly ClaimedDelivery[]): Promise<BatchEnd> {
  const { db, settings } = ctx;
  const waiting = [...batch];
  /** Claims whose outcome is not recorded yet: their leases are renewed. */
  const unrecorded = new Map<number, Claim>(batch.map((d) => [d.id, { id: d.id, attempts: d.attempts }]));
  const recorder = new SentRecorder(db, ctx.clock, settings.recordEvery, (ids) => {
    for (const id of ids) unrecorded.delete(id);
  });
  let end = 'done' as BatchEnd;

  let checking = false;
  let renewedAt = Date.now();
  const watch = setInterval(() => {
    if (checking) return;
    checking = true;
    watchBatch()
      .catch((error) => ctx.log.warn({ err: error, kind: ctx.kind, id: ctx.messageId }, 'batch status check failed'))
      .finally(() => {
        checking = false;
      });
  }, settings.statusCheckMs);
  async function watchBatch(): Promise<void> {
    if ((await messageStatus(db, ctx.kind, ctx.messageId)) !== 'Sending' && end === 'done') end = 'cancelled';
    if (Date.now() - renewedAt < settings.leaseMs / 3) return;
    renewedAt = Date.now();
    const held = [...unrecorded.values()];
    const kept = await renewLeases(db, held, ctx.clock(), settings.leaseMs);
    // A claim lost to another worker (this one stalled past its lease) is no longer ours to send.
    for (let i = waiting.length - 1; i >= 0; i--) if (!kept.has(waiting[i]!.id)) waiting.splice(i, 1);
  }

  const lane = async () => {
    for (;;) {
      await recorder.room();
      if (end !== 'done' || ctx.stopping()) return;
      const delivery = waiting.shift();
      if (!delivery) return;
      // A contact who unsubscribed (or bounced, or complained) since the recipients were resolved
      // is not contacted: the pending delivery is cancelled, uncounted.
      const outcome: DeliveryOutcome =
        delivery.contact_status === 'Subscribed'
          ? await deliverSafely(ctx.channel, ctx.prepared, delivery)
          : { kind: 'cancelled', reason: `the contact is ${delivery.contact_status} now` };
      if (outcome.kind === 'sent')
        recorder.add({ id: delivery.id, attempts: delivery.attempts, providerMessageId: outcome.providerMessageId ?? null });
      else {
        await recordOther(ctx, delivery, outcome);
        unrecorded.delete(delivery.id);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(settings.sendConcurrency, batch.length) }, lane));
  } finally {
    clearInterval(watch);
    await recorder.drain();
  }
  if (ctx.stopping() && end === 'done') end = 'stopped';
  // Claims never handed over: cancelled with their message, or back to the queue for another worker.
  if (waiting.length > 0) await releaseClaims(db, waiting, end === 'cancelled' ? 'cancelled' : 'queued', ctx.clock());
  return end;
}

async function deliverSafely(channel: Channel, prepared: unknown, delivery: ClaimedDelivery): Promise<DeliveryOutcome> {
  try {
    return await channel.deliver(prepared, delivery);
  } catch (error) {
    return { kind: 'deferred', error: error instanceof Error ? error.message : String(error) };
  }
}

/** Any outcome but `sent`: the delivery's next state and counters, in one statement. */
async function recordOther(
  ctx: BatchContext,
  delivery: ClaimedDelivery,
  outcome: Exclude<DeliveryOutcome, { kind: 'sent' }>,
): Promise<void> {
  const { db, settings } = ctx;
  const now = ctx.clock();
  const claim = { id: delivery.id, attempts: delivery.attempts };
  switch (outcome.kind) {
    case 'cancelled':
      await transitionDelivery(db, claim, ['sending'], 'cancelled', { last_error: outcome.reason }, {}, now);
      return;
    case 'held':
      await transitionDelivery(db, claim, ['sending'], 'held', { next_attempt_at: outcome.until, last_error: outcome.reason }, {}, now);
      return;
    case 'deferred': {
      if (delivery.attempts >= settings.maxAttempts) {
        const error = `gave up after ${delivery.attempts} attempts: ${outcome.error}`;
        await transitionDelivery(db, claim, ['sending'], 'failed', { last_error: error }, { deferred: 1, failed: 1 }, now);
        return;
      }
      const delay = Math.min(settings.retryMaxMs, settings.retryBaseMs * 2 ** (delivery.attempts - 1));
      const next = new Date(now.getTime() + delay);
      await transitionDelivery(
        db,
        claim,
        ['sending'],
        'deferred',
        { next_attempt_at: next, last_error: outcome.error },
        { deferred: 1 },
        now,
      );
      return;
    }
    case 'failed': {
      const counters = outcome.bounce ? { failed: 1, bounce: 1, hard_bounce: 1 } : { failed: 1 };
      const moved = await transitionDelivery(
        db,
        claim,
        ['sending'],
        outcome.bounce ? 'bounced' : 'failed',
        { last_error: outcome.error },
        counters,
        now,
      );
      if (moved && outcome.contactStatus) {
        await db
          .updateTable('contacts')
          .set({ status: outcome.contactStatus, updated_at: now })
          .where('id', '=', delivery.contact_id)
          .where('user_id', '=', delivery.user_id)
          .where('status', '=', 'Subscribed')
          .execute();
      }
    }
  }
}

/**
 * Buffers `sent` outcomes and records them `recordEvery` at a time, one statement each, one
 * statement in flight at a time. `room()` holds the lanes while `2 × recordEvery` are unrecorded,
 * which bounds what a crash can leave accepted but unrecorded.
 */
class SentRecorder {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #every: number;
  readonly #recorded: (ids: number[]) => void;
  /** This recorder's counter shard (see recordSent). */
  readonly #shard = Math.floor(Math.random() * COUNTER_SHARDS);
  #buffer: SentDelivery[] = [];
  #inFlight = 0;
  #flushing: Promise<void> | undefined;
  #failure: unknown;

  constructor(db: Db, clock: Clock, every: number, recorded: (ids: number[]) => void) {
    this.#db = db;
    this.#clock = clock;
    this.#every = every;
    this.#recorded = recorded;
  }

  add(sent: SentDelivery): void {
    this.#buffer.push(sent);
    if (this.#buffer.length >= this.#every) this.#flush();
  }

  async room(): Promise<void> {
    while (this.#buffer.length + this.#inFlight >= 2 * this.#every && this.#flushing) await this.#flushing;
    if (this.#failure) throw this.#failure;
  }

  async drain(): Promise<void> {
    while (this.#flushing) await this.#flushing;
    if (this.#buffer.length > 0) {
      this.#flush();
      while (this.#flushing) await this.#flushing;
    }
    if (this.#failure) throw this.#failure;
  }

  #flush(): void {
    if (this.#flushing || this.#buffer.length === 0) return;
    const taken = this.#buffer;
    this.#buffer = [];
    this.#inFlight = taken.length;
    this.#flushing = recordSent(this.#db, taken, this.#clock(), this.#shard)
      .then(
        () => this.#recorded(taken.map((s) => s.id)),
        (error: unknown) => {
          this.#failure ??= error;
        },
      )
      .finally(() => {
        this.#inFlight = 0;
        this.#flushing = undefined;
        if (this.#buffer.length >= this.#every && !this.#failure) this.#flush();
      });
  }
}
