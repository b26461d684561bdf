/**
 * Group commit: items handed over one by one are written in batches, each batch one statement or
 * one transaction, so a burst of work costs a few round trips instead of one per item. A batch is
 * started as soon as a write slot is free (or after `delay`), and whatever arrives while batches
 * are being written goes together into the next: the busier the writer, the larger its batches.
 *
 * The sending engine records `sent` outcomes this way (sending/send-batch.ts), the inbound receiver
 * its messages (inbound/receiver.ts) and the webhook worker its attempts (webhooks/webhook-worker.ts).
 */
interface GroupCommitOptions<T> {
  /**
   * Writes one batch. Items the answer names failed on their own (their `add` rejects with the
   * reason given); the others are written. A throw fails the whole batch.
   */
  write(batch: T[]): Promise<ReadonlyMap<T, unknown> | undefined>;
  /** Most items in one batch. */
  maxBatch: number;
  /** Batches written at once (default 1). */
  maxInFlight?: number;
  /**
   * When a batch that is not full starts: as soon as a slot is free (0, the default); on the next
   * turn of the event loop (`'tick'`), with whatever that turn adds; or after this many milliseconds.
   */
  delay?: number | 'tick';
  /** A failed batch fails every item still waiting, and nothing more is written (the first failure stands). */
  stopOnFailure?: boolean;
}

interface Waiting<T> {
  item: T;
  resolve: () => void;
  reject: (reason: unknown) => void;
}

export class GroupCommit<T> {
  readonly #options: Required<GroupCommitOptions<T>>;
  #waiting: Waiting<T>[] = [];
  /** Batches being written, and the items in them. */
  #inFlight = 0;
  #writing = 0;
  /** The items waiting have waited their `delay`: the next free slot starts a batch at once. */
  #due = false;
  #timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  #failure: { reason: unknown } | undefined;
  /** Resolved, and replaced, whenever a batch ends. */
  #batchEnded = Promise.withResolvers<void>();

  constructor(options: GroupCommitOptions<T>) {
    this.#options = { maxInFlight: 1, delay: 0, stopOnFailure: false, ...options };
  }

  /** Resolves once the item is written; rejects when its batch failed, or the item did. */
  add(item: T): Promise<void> {
    if (this.#failure && this.#options.stopOnFailure) return Promise.reject(this.#failure.reason);
    const written = new Promise<void>((resolve, reject) => this.#waiting.push({ item, resolve, reject }));
    this.#pump();
    return written;
  }

  /** Items waiting or being written. */
  get size(): number {
    return this.#waiting.length + this.#writing;
  }

  /** The first batch failure, if one happened. */
  get failure(): unknown {
    return this.#failure?.reason;
  }

  /** Resolves once fewer than `limit` items are waiting or being written; throws the first failure. */
  async room(limit = 2 * this.#options.maxBatch): Promise<void> {
    while (this.size >= limit && this.#inFlight > 0) await this.#batchEnded.promise;
    if (this.#failure) throw this.#failure.reason;
  }

  /** Writes what waits now, without its delay, and resolves once everything is written; throws the first failure. */
  async drain(): Promise<void> {
    for (;;) {
      this.#due = true;
      this.#pump();
      if (this.#waiting.length === 0 && this.#inFlight === 0) break;
      await this.#batchEnded.promise;
    }
    if (this.#failure) throw this.#failure.reason;
  }

  #pump(): void {
    const { maxBatch, maxInFlight, delay } = this.#options;
    while (this.#waiting.length > 0 && this.#inFlight < maxInFlight && (this.#due || delay === 0 || this.#waiting.length >= maxBatch)) {
      this.#start(this.#waiting.splice(0, maxBatch));
    }
    if (this.#waiting.length === 0) this.#due = false;
    else if (!this.#due && this.#timer === undefined && delay !== 0) {
      const fire = () => {
        this.#timer = undefined;
        this.#due = true;
        this.#pump();
      };
      this.#timer = delay === 'tick' ? setImmediate(fire) : setTimeout(fire, delay);
    }
  }

  #start(batch: Waiting<T>[]): void {
    this.#inFlight++;
    this.#writing += batch.length;
    this.#options
      .write(batch.map((waiting) => waiting.item))
      .then(
        (failed) => {
          for (const waiting of batch) {
            if (failed?.has(waiting.item)) waiting.reject(failed.get(waiting.item));
            else waiting.resolve();
          }
        },
        (reason: unknown) => {
          this.#failure ??= { reason };
          for (const waiting of batch) waiting.reject(reason);
          if (this.#options.stopOnFailure) for (const waiting of this.#waiting.splice(0)) waiting.reject(this.#failure.reason);
        },
      )
      .finally(() => {
        this.#inFlight--;
        this.#writing -= batch.length;
        this.#batchEnded.resolve();
        this.#batchEnded = Promise.withResolvers<void>();
        this.#pump();
      });
  }
}
