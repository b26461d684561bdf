import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { DatabaseHandle, Db } from '../db/database.ts';
import { failureLevel, whileDatabaseAway } from '../db/errors.ts';
import type { GroupCommit } from '../db/group-commit.ts';
import { type DeliverJob, type DueJob, type JobQueue, QUEUES } from '../db/job-queue.ts';
import type { SendingPause } from '../identity/users.ts';
import type { MessageKind, MessageRows } from '../messages/kinds.ts';
import { finishSending, loadMessage, markResolved, sendingMessages, startSending } from '../messages/message-tables.ts';
import { type Clock, realTimeMs } from '../time.ts';
import { mustWait } from './brakes.ts';
import type { Channel, Channels } from './channel.ts';
import { cancelPendingDeliveries, claimDeliveries, resolveDeliveries, type SentDelivery, summarizeDeliveries } from './deliveries.ts';
import { LeaseKeeper } from './leases.ts';
import { Slots, sendBatch, sentRecorder } from './send-batch.ts';

/** What a delivery job keeps from round to round. */
interface DeliverState {
  started: number;
  prepared: unknown;
  preparedFor: Date | undefined;
}

interface EngineDeps {
  database: DatabaseHandle;
  config: Config;
  queue: JobQueue;
  clock: Clock;
  channels: Channels;
  log: FastifyBaseLogger;
  /** Told when the brakes pause a user's sending (once per pause): the worker emails the user and the Administrators. */
  onSendingPaused?: (userId: number, pause: SendingPause) => void;
}

/** How sending behaves; the defaults suit production, tests shorten the waits. */
export interface EngineSettings {
  /** Deliveries one delivery job claims per round trip (SEND_BATCH_SIZE). */
  batchSize: number;
  /** Deliveries one batch has with the provider at once (its lanes: the SMTP pool's connections). */
  sendConcurrency: number;
  /**
   * Deliveries of the process that the provider may have accepted without their outcome recorded
   * yet (its hand-over slots, send-batch.ts): also the most a crash can send twice.
   */
  handOverSlots: number;
  /** Most `sent` outcomes one statement records (they are group-committed: see send-batch.ts). */
  recordEvery: number;
  /** Delivery jobs one process runs at once. */
  loops: number;
  /** Most delivery jobs started per message when it becomes due (each may run on another worker); fewer for small ones. */
  parallelism: number;
  /** How long a claim holds before another worker may take the delivery over; renewed every quarter of it while alive. */
  leaseMs: number;
  /** How often a running batch reads its message's status (how fast a cancel takes effect). */
  statusCheckMs: number;
  /** A delivery job hands over to a fresh one after this long (pg-boss expires long jobs). */
  maxJobMs: number;
  /** First retry delay after a temporary failure; doubled at each further attempt. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** Attempts before a delivery that keeps failing temporarily is given up. */
  maxAttempts: number;
  sweepIntervalMs: number;
}

/**
 * The sending engine: turns due messages into deliveries and works through them.
 *
 * 1. `message-due` claims the message (`Scheduled` → `Sending`, only if it still has the send
 *    time the job was made for), resolves its recipients into the delivery ledger, and starts
 *    delivery jobs: one per few batches, up to `parallelism`.
 * 2. `message-deliver` claims batches of deliveries and hands them to the message's channel
 *    (send-batch.ts). When nothing is left to claim it finishes the message (`Sent`/`Failed`), or
 *    asks for a delivery job at the next retry or lease expiry.
 * 3. A sweeper restarts delivery on every `Sending` message at start and then now and then, so
 *    work a crashed worker held is picked up by the survivors.
 */
export class SendingEngine {
  readonly #deps: EngineDeps;
  readonly #settings: EngineSettings;
  readonly #leases: LeaseKeeper;
  readonly #handOvers: Slots;
  #sent: GroupCommit<SentDelivery> | undefined;
  #sweeper: NodeJS.Timeout | undefined;
  #stopping = false;

  constructor(deps: EngineDeps, settings: EngineSettings) {
    this.#deps = deps;
    this.#settings = settings;
    this.#leases = new LeaseKeeper(deps.database.db, deps.clock, settings.leaseMs, deps.log);
    this.#handOvers = new Slots(settings.handOverSlots);
  }

  /** The process's hand-over slots, shared by every batch it runs (send-batch.ts). */
  get handOvers(): Slots {
    return this.#handOvers;
  }

  /** The process's recorder of `sent` outcomes (send-batch.ts); one that failed for good (its process stopping) is replaced. */
  #sentRecorder(): GroupCommit<SentDelivery> {
    if (!this.#sent || this.#sent.failure !== undefined) {
      this.#sent = sentRecorder({ db: this.#db, clock: this.#deps.clock, stopping: () => this.#stopping }, this.#settings.recordEvery);
    }
    return this.#sent;
  }

  get #db(): Db {
    return this.#deps.database.db;
  }

  async start(): Promise<void> {
    const { boss } = this.#deps.queue;
    this.#leases.start();
    await boss.work<DueJob>(QUEUES.due, { pollingIntervalSeconds: 0.5, batchSize: 1 }, async ([job]) => {
      if (job) await this.#logged('due', job.data, () => this.handleDue(job.data));
    });
    await boss.work<DeliverJob>(
      QUEUES.deliver,
      { pollingIntervalSeconds: 0.5, batchSize: 1, localConcurrency: this.#settings.loops },
      async ([job]) => {
        if (job) await this.#logged('deliver', job.data, () => this.handleDeliver(job.data));
      },
    );
    await this.sweep();
    this.#sweeper = setInterval(() => {
      this.sweep().catch((error) => this.#deps.log[failureLevel(error)]({ err: error }, 'sweep failed'));
    }, this.#settings.sweepIntervalMs);
    this.#sweeper.unref();
  }

  /**
   * Stops taking work. Jobs under way stop handing deliveries over, record what they sent, give
   * back the claims they had not started, and end.
   */
  async stop(): Promise<void> {
    this.#stopping = true;
    clearInterval(this.#sweeper);
    await this.#deps.queue.boss.offWork(QUEUES.due, { wait: true });
    await this.#deps.queue.boss.offWork(QUEUES.deliver, { wait: true });
    this.#leases.stop();
  }

  async handleDue(job: DueJob): Promise<void> {
    // A paused sender's message stays Scheduled; resuming asks for its due job again, released
    // (brakes.ts). Any other due job is weighed: its send_at, in whole seconds, may equal the resume's.
    const due = await loadMessage(this.#db, job.kind, job.id);
    if (due?.status === 'Scheduled' && (await this.#mustWait(due.user_id, job.released ? 'released' : { sendAt: null }))) {
      this.#deps.log.info({ kind: job.kind, id: job.id, user: due.user_id }, 'message due: held, the sender is paused');
      return;
    }
    const message = await startSending(this.#db, job.kind, job.id, new Date(job.sendAt), this.#deps.clock());
    if (!message) return; // rescheduled, unscheduled or deleted since this job was made
    this.#deps.log.info({ kind: job.kind, id: job.id }, 'message due: sending');
    const deliveries = await this.#resolve(job.kind, message);
    // Parallel jobs only where they help: each one a small message does not need is a no-op that
    // still takes a turn of the queue, and other messages wait behind it.
    const jobs = Math.min(this.#settings.parallelism, Math.max(1, Math.ceil(deliveries / (4 * this.#settings.batchSize))));
    for (let i = 0; i < jobs; i++) await this.#deps.queue.requestDelivery({ kind: job.kind, id: job.id });
  }

  async handleDeliver<K extends MessageKind>(job: DeliverJob<K>): Promise<void> {
    const state: DeliverState = { started: realTimeMs(), prepared: undefined, preparedFor: undefined };
    // While the database is out of reach this job pauses and tries again, keeping its place (its
    // claims were recorded or kept by sendBatch); anything else fails the job (retried).
    const paused = (error: unknown) =>
      this.#deps.log.warn(
        { kind: job.kind, id: job.id, err: { message: (error as Error).message } },
        'database unreachable: delivery paused',
      );
    while (!this.#stopping) {
      const round = await whileDatabaseAway(
        () => this.#deliverRound(job, state),
        () => this.#stopping,
        paused,
      );
      if (round === 'done') return;
    }
  }

  /** One claim-and-send round of a delivery job: 'more' to go on, 'done' when the job has ended. */
  async #deliverRound<K extends MessageKind>(job: DeliverJob<K>, state: DeliverState): Promise<'more' | 'done'> {
    const channel: Channel<K> | undefined = this.#deps.channels[job.kind];
    const message = await loadMessage(this.#db, job.kind, job.id);
    if (!message || message.deleted_at) return 'done';
    const now = this.#deps.clock();
    if (message.status === 'Cancelled') {
      await cancelPendingDeliveries(this.#db, job.kind, job.id, now);
      return 'done';
    }
    if (message.status !== 'Sending') return 'done';
    // Paused between batches: the pending deliveries wait for the resume (or the sweeper after it).
    if (await this.#mustWait(message.user_id, { sendAt: message.send_at })) return 'done';
    if (!message.resolved_at) await this.#resolve(job.kind, message);
    if (!channel) {
      await this.#finish(
        job.kind,
        job.id,
        `No ${job.kind === 'voicemail_drop' ? 'voicemail provider' : 'email'} channel is set up on this server.`,
      );
      return 'done';
    }
    if (realTimeMs() - state.started > this.#settings.maxJobMs) {
      await this.#deps.queue.requestDelivery(job);
      return 'done';
    }
    if (state.preparedFor?.getTime() !== message.updated_at.getTime()) {
      state.prepared = await channel.prepare(message);
      state.preparedFor = message.updated_at;
    }
    // After an outage, this process keeps its own claims before it claims anything (leases.ts).
    await this.#leases.ready();
    const takeOver = now >= this.#leases.takeOverAfter();
    const batch = await claimDeliveries(
      this.#db,
      job.kind,
      job.id,
      this.#settings.batchSize,
      now,
      this.#settings.leaseMs,
      takeOver,
      this.#leases.heldIds(),
    );
    if (batch.length === 0) {
      await this.#settle(job);
      return 'done';
    }
    this.#deps.log.debug({ kind: job.kind, id: job.id, claimed: batch.length }, 'deliveries claimed');
    await sendBatch(
      {
        db: this.#db,
        clock: this.#deps.clock,
        log: this.#deps.log,
        settings: this.#settings,
        kind: job.kind,
        messageId: job.id,
        channel,
        prepared: state.prepared,
        stopping: () => this.#stopping,
        leases: this.#leases,
        handOvers: this.#handOvers,
        sentRecorder: () => this.#sentRecorder(),
      },
      batch,
    );
    return 'more';
  }

  /** Restarts delivery on every message that is sending: what a crashed worker held is taken over. */
  async sweep(): Promise<void> {
    for (const message of await sendingMessages(this.#db)) await this.#deps.queue.requestDelivery(message, { coalesce: true });
  }

  /** The brakes (brakes.ts): whether the user's message must wait, pausing them if their rates say so. */
  #mustWait(userId: number, message: Parameters<typeof mustWait>[3]): Promise<boolean> {
    return mustWait(this.#db, this.#deps.config.brakes, userId, message, this.#deps.clock(), (id, pause) => {
      this.#deps.log.warn({ user: id, ...pause }, `sending paused for user ${id}: ${pause.reason.replace(/_/g, ' ')} over the brake`);
      this.#deps.onSendingPaused?.(id, pause);
    });
  }

  /** A failing job is retried by the queue; the log says why it failed. */
  async #logged(what: string, data: object, run: () => Promise<void>): Promise<void> {
    try {
      await run();
    } catch (error) {
      this.#deps.log[failureLevel(error)]({ err: error, job: data }, `${what} job failed`);
      throw error;
    }
  }

  /** Resolves the message's recipients into deliveries (once; idempotent) and returns how many it has. */
  async #resolve(kind: MessageKind, message: MessageRows[MessageKind]): Promise<number> {
    const now = this.#deps.clock();
    const deliveries = await resolveDeliveries(this.#db, kind, message, now);
    await markResolved(this.#db, kind, message.id, now);
    return deliveries;
  }

  /**
   * Nothing claimable is left: finish the message, or ask for a delivery job at the next retry or
   * lease expiry. A job never waits in place: it would hold one of the process's few job slots
   * while other messages queue behind it. (A live claim's holder finishes the message itself;
   * the job at its lease expiry only matters if that holder died.)
   */
  async #settle(job: DeliverJob): Promise<void> {
    const summary = await summarizeDeliveries(this.#db, job.kind, job.id);
    if (summary.pending === 0) {
      const reason =
        summary.total === 0
          ? 'No recipient could receive this message.'
          : summary.failed === summary.total
            ? 'Every delivery failed.'
            : null;
      return this.#finish(job.kind, job.id, reason);
    }
    // Nothing was due to claim now: what is left is due later, claims this process may take over
    // only once it has seen the database for a lease after an outage (leases.ts), or its own
    // claims whose renewal is late: look again soon, not at once.
    const soonest = Math.max(this.#leases.takeOverAfter().getTime(), this.#deps.clock().getTime() + 250);
    const due = [summary.nextAttemptAt, summary.leaseUntil]
      .filter((d): d is Date => d !== null)
      .map((d) => new Date(Math.max(d.getTime(), soonest)))
      .sort((a, b) => a.getTime() - b.getTime())[0];
    await this.#deps.queue.requestDelivery(job, { startAfter: due ?? new Date(this.#deps.clock().getTime() + this.#settings.leaseMs) });
  }

  /** `Sent`, or `Failed` with a reason; only a message still `Sending` changes (once). */
  async #finish(kind: MessageKind, id: number, failure: string | null): Promise<void> {
    const status = failure ? 'Failed' : 'Sent';
    if (await finishSending(this.#db, kind, id, failure, this.#deps.clock())) this.#deps.log.info({ kind, id, status }, 'message finished');
  }
}
