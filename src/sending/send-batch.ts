import type { FastifyBaseLogger } from 'fastify';
import type { Claim } from '../db/claims.ts';
import type { Db } from '../db/database.ts';
import { whileDatabaseAway } from '../db/errors.ts';
import { GroupCommit } from '../db/group-commit.ts';
import type { MessageKind } from '../messages/kinds.ts';
import { messageStatus } from '../messages/message-tables.ts';
import { COUNTER_SHARDS } from '../messages/reporting.ts';
import { backoffMs, type Clock } from '../time.ts';
import type { Channel, DeliveryOutcome, HandOver } from './channel.ts';
import { type ClaimedDelivery, recordSent, releaseClaims, type SentDelivery } from './deliveries.ts';
import { type HandOverResult, recordHandOver } from './delivery-events.ts';
import type { LeaseKeeper } from './leases.ts';

/** How one batch is worked through; see EngineSettings for each. */
interface BatchSettings {
  sendConcurrency: number;
  recordEvery: number;
  leaseMs: number;
  statusCheckMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  maxAttempts: number;
}

interface BatchContext {
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
  /** The process's lease heartbeat (leases.ts). */
  leases: LeaseKeeper;
  /**
   * The process's hand-over slots (EngineSettings.handOverSlots, shared by every batch it runs):
   * a slot is held from handing a delivery to the provider until its outcome is recorded. So at
   * any instant at most that many deliveries of the process can have been accepted by the provider
   * without being on disk — the most a crash can make go out twice.
   */
  handOvers: Slots;
  /** The process's recorder of `sent` outcomes, shared by every batch it runs (see sentRecorder). */
  sentRecorder: () => GroupCommit<SentDelivery>;
}

/** A counting semaphore: `acquire()` resolves with the function that gives the slot back. */
export class Slots {
  #free: number;
  readonly #queue: (() => void)[] = [];

  constructor(size: number) {
    this.#free = size;
  }

  /** Slots free now: the size once every slot taken has been given back. */
  get free(): number {
    return this.#free;
  }

  async acquire(): Promise<() => void> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#queue.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#queue.shift();
      if (next) next();
      else this.#free++;
    };
  }
}

/** How a batch ended: every delivery handed over, or cut short by a cancel or by the worker stopping. */
type BatchEnd = 'done' | 'cancelled' | 'stopped';

/**
 * Hands a batch of claimed deliveries to the channel, `sendConcurrency` at a time, and records
 * each outcome. `sent` outcomes — nearly all of them — are group-committed (`sentRecorder`: written
 * at once, those that arrive meanwhile together in the next statement); other outcomes at once,
 * one by one.
 *
 * While the batch runs, the message's status is read every `statusCheckMs` (a cancel stops the
 * batch: what was not handed over yet is cancelled) and the process's LeaseKeeper renews the
 * leases of its unrecorded claims, so a slow provider never lets another worker take them over.
 *
 * The duplicate window (docs/sending.md): a delivery the provider accepted is recorded one
 * statement's round trip later, so a crash leaves unrecorded only the acceptances of that moment:
 * about as many as the SMTP connections deliver in a round trip.
 */
export async function sendBatch(ctx: BatchContext, batch: readonly ClaimedDelivery[]): Promise<BatchEnd> {
  const { db, settings } = ctx;
  const waiting = [...batch];
  /** Claims whose outcome is not recorded yet: their leases are renewed. */
  const unrecorded = new Map<number, Claim>(batch.map((d) => [d.id, { id: d.id, attempts: d.attempts }]));
  const recorder = ctx.sentRecorder();
  let end = 'done' as BatchEnd;

  // The process's heartbeat renews these claims' leases; one lost to another worker (this one
  // stalled past its lease) is no longer ours to send.
  const stopRenewing = ctx.leases.hold({
    claims: () => unrecorded.values(),
    kept: (ids) => {
      for (let i = waiting.length - 1; i >= 0; i--) if (!ids.has(waiting[i]!.id)) waiting.splice(i, 1);
    },
  });
  let checking = false;
  const watch = setInterval(() => {
    if (checking) return;
    checking = true;
    messageStatus(db, ctx.kind, ctx.messageId)
      .then((status) => {
        if (status !== 'Sending' && end === 'done') end = 'cancelled';
      })
      .catch((error) => ctx.log.warn({ err: error, kind: ctx.kind, id: ctx.messageId }, 'batch status check failed'))
      .finally(() => {
        checking = false;
      });
  }, settings.statusCheckMs);

  /** `sent` records still being written, each holding its hand-over slot until it is. */
  const recording: Promise<void>[] = [];
  const lane = async () => {
    for (;;) {
      await recorder.room();
      if (end !== 'done' || ctx.stopping()) return;
      const delivery = waiting.shift();
      if (!delivery) return;
      // A hand-over slot of the process, taken at the last moment before the provider accepts
      // (the channel calls handOver: an SMTP message waits at its final dot) and held until the
      // outcome is on disk (see ctx.handOvers). The exchange of the lane's next message overlaps
      // the record of this one. The channel may not wait for the slot (SMTP asks for it and goes on
      // with the envelope), so the slot asked for is kept as its promise: a send that ends before
      // it comes (refused, dropped) gives it back when it does, or it would be lost to the process.
      let slot: Promise<() => void> | undefined;
      const takeSlot = () => (slot ??= ctx.handOvers.acquire());
      const handOver: HandOver = async () => {
        await takeSlot();
      };
      try {
        // A contact who unsubscribed (or bounced, or complained) since the recipients were resolved
        // is not contacted: the pending delivery is cancelled, uncounted.
        const outcome: DeliveryOutcome =
          delivery.contact_status === 'Subscribed'
            ? await deliverSafely(ctx.channel, ctx.prepared, delivery, handOver)
            : { kind: 'cancelled', reason: `the contact is ${delivery.contact_status} now` };
        if (outcome.kind === 'sent') {
          const release = await takeSlot(); // a channel that does not stage: the slot is taken now
          slot = undefined;
          const recorded = recorder
            .add({ id: delivery.id, attempts: delivery.attempts, providerMessageId: outcome.providerMessageId ?? null })
            .then(() => {
              unrecorded.delete(delivery.id);
            });
          // A failure to record for good is thrown by room() and at the batch's end.
          const done = recorded.finally(release);
          done.catch(() => {});
          recording.push(done);
        } else {
          await whileDatabaseAway(() => recordOther(ctx, delivery, outcome));
          unrecorded.delete(delivery.id);
        }
      } finally {
        slot?.then((release) => release());
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(settings.sendConcurrency, batch.length) }, lane));
  } finally {
    clearInterval(watch);
    try {
      // This batch's own outcomes, every one settled (its slots given back), then the first failure.
      await Promise.allSettled(recording);
      await Promise.all(recording);
    } finally {
      stopRenewing();
    }
  }
  if (ctx.stopping() && end === 'done') end = 'stopped';
  // Claims never handed over: cancelled with their message, or back to the queue for another worker.
  if (waiting.length > 0) {
    const to = end === 'cancelled' ? 'cancelled' : 'queued';
    await whileDatabaseAway(() => releaseClaims(db, waiting, to, ctx.clock()), ctx.stopping);
  }
  return end;
}

async function deliverSafely(channel: Channel, prepared: unknown, delivery: ClaimedDelivery, handOver: HandOver): Promise<DeliveryOutcome> {
  try {
    return await channel.deliver(prepared, delivery, handOver);
  } catch (error) {
    return { kind: 'deferred', error: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * Any outcome but `sent`, recorded by the one outcome recorder (delivery-events.ts): the engine
 * decides only when a temporary failure is tried again, or that it was the last try.
 */
async function recordOther(
  ctx: BatchContext,
  delivery: ClaimedDelivery,
  outcome: Exclude<DeliveryOutcome, { kind: 'sent' }>,
): Promise<void> {
  const { settings } = ctx;
  const now = ctx.clock();
  await recordHandOver(ctx.db, delivery, handOverResult(outcome, delivery.attempts, settings, now), now);
}

function handOverResult(
  outcome: Exclude<DeliveryOutcome, { kind: 'sent' }>,
  attempts: number,
  settings: BatchSettings,
  now: Date,
): HandOverResult {
  switch (outcome.kind) {
    case 'cancelled':
    case 'held':
      return outcome;
    case 'throttled':
      return { kind: 'throttled', at: new Date(now.getTime() + outcome.retryInMs), error: outcome.error, refused: outcome.refused };
    case 'failed':
      return {
        kind: 'failed',
        error: outcome.error,
        bounce: outcome.bounce === true,
        gaveUp: false,
        ...(outcome.outcome ? { outcome: outcome.outcome } : {}),
      };
    case 'deferred': {
      if (attempts >= settings.maxAttempts) {
        const error = `gave up after ${attempts} attempts: ${outcome.error}`;
        return { kind: 'failed', error, bounce: false, gaveUp: true, ...(outcome.outcome ? { outcome: outcome.outcome } : {}) };
      }
      const delay = backoffMs(attempts, { baseMs: settings.retryBaseMs, maxMs: settings.retryMaxMs });
      return { kind: 'retry', at: new Date(Math.max(now.getTime() + delay, outcome.notBefore?.getTime() ?? 0)), error: outcome.error };
    }
  }
}

/**
 * The recorder of `sent` outcomes: one per process (the engine's), so the outcomes of every batch
 * it runs share its statements — with one recorder per batch, two delivery jobs halved the rows per
 * statement (docs/performance.md). It records by group commit (db/group-commit.ts): an outcome is written as soon as no
 * statement is in flight, and the outcomes that arrive while one is (a few milliseconds' worth) go
 * together in the next — at most `recordEvery` per statement. An acceptance is thus on disk one
 * round trip after the provider's `250`, which is what bounds the duplicate window after a crash
 * (docs/sending.md). `room()` holds the lanes while `2 × recordEvery` are unrecorded.
 *
 * While the database is out of reach the outcomes stay here and the statement is tried again
 * (the lanes pause at `room()`), so an outage neither loses an acceptance nor sends it twice; only
 * a stopping process gives up, and then for good. Each recorder counts into one counter shard of
 * its own (see recordSent).
 */
export function sentRecorder(ctx: Pick<BatchContext, 'db' | 'clock' | 'stopping'>, recordEvery: number): GroupCommit<SentDelivery> {
  const shard = Math.floor(Math.random() * COUNTER_SHARDS);
  return new GroupCommit<SentDelivery>({
    maxBatch: recordEvery,
    stopOnFailure: true,
    write: async (batch) => {
      await whileDatabaseAway(() => recordSent(ctx.db, batch, ctx.clock(), shard), ctx.stopping);
      return undefined;
    },
  });
}
