import type { FastifyBaseLogger } from 'fastify';
import type { Claim } from '../db/claims.ts';
import type { Db } from '../db/database.ts';
import type { Clock } from '../time.ts';
import { renewLeases } from './deliveries.ts';

/** Claims one running batch holds, and what to do with those another worker has taken over. */
interface HeldClaims {
  claims(): Iterable<Claim>;
  /** Called with the ids whose renewal went through; the others are no longer this batch's. */
  kept(ids: Set<number>): void;
}

/**
 * The heartbeat of a worker process's claims: every quarter of a lease, one statement renews the
 * lease of every claim its running batches hold, so a live worker keeps its claims however slow
 * the provider is, and a dead one's run out within a lease (SEND_LEASE) and are taken over.
 *
 * When the database is out of reach the renewal fails and is tried again every 250 ms. Until one
 * goes through, `ready()` holds the process's claiming: when the database comes back, this process
 * first keeps its own claims (whose leases may have run out during the outage — it is not dead,
 * and it has sent some of them) and only then claims anything, so it never takes over, and sends
 * again, what it sent itself while the database was away.
 *
 * Nor does any other process: a process that lost the database may judge another's claims
 * abandoned only once it has seen the database again for a whole lease (`takeOverAfter`). Every
 * worker alive through the outage renews its own claims within that lease, so only the claims of
 * a worker that is really gone are taken over — never those of a peer still recording what it
 * sent before the outage.
 */
export class LeaseKeeper {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #leaseMs: number;
  readonly #log: FastifyBaseLogger;
  readonly #held = new Set<HeldClaims>();
  #timer: NodeJS.Timeout | undefined;
  #renewing: Promise<boolean> | undefined;
  #failing = false;
  #running = false;
  /** When the database answered again after this process had lost it; undefined if it never did. */
  #backSince: number | undefined;

  constructor(db: Db, clock: Clock, leaseMs: number, log: FastifyBaseLogger) {
    this.#db = db;
    this.#clock = clock;
    this.#leaseMs = leaseMs;
    this.#log = log;
  }

  start(): void {
    this.#running = true;
    this.#schedule(this.#leaseMs / 4);
  }

  stop(): void {
    this.#running = false;
    clearTimeout(this.#timer);
  }

  /** Registers a batch's claims for renewal; the returned function lets go of them. */
  hold(held: HeldClaims): () => void {
    this.#held.add(held);
    return () => this.#held.delete(held);
  }

  /** Resolves once the last renewal went through (at once, unless the database was away). */
  async ready(): Promise<void> {
    while (this.#failing) {
      if (!(await this.renew())) await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** The ids of every claim this process holds: never to be taken over by itself. */
  heldIds(): number[] {
    return [...this.#held].flatMap((batch) => [...batch.claims()].map((claim) => claim.id));
  }

  /** From when this process may take over claims whose lease ran out (see the class comment). */
  takeOverAfter(): Date {
    return new Date(this.#backSince === undefined ? 0 : this.#backSince + this.#leaseMs);
  }

  /** Renews every held claim now; false when the database did not answer. */
  renew(): Promise<boolean> {
    this.#renewing ??= this.#renewAll().finally(() => {
      this.#renewing = undefined;
    });
    return this.#renewing;
  }

  async #renewAll(): Promise<boolean> {
    const batches = [...this.#held];
    const claims = batches.flatMap((b) => [...b.claims()]);
    try {
      const kept = await renewLeases(this.#db, claims, this.#clock(), this.#leaseMs);
      if (this.#failing) {
        this.#log.info({ claims: claims.length, kept: kept.size }, 'database back: leases renewed');
        this.#backSince = this.#clock().getTime();
      }
      this.#failing = false;
      for (const batch of batches) batch.kept(kept);
      return true;
    } catch (error) {
      if (!this.#failing) this.#log.warn({ err: { message: (error as Error).message } }, 'lease renewal failed; retrying');
      this.#failing = true;
      return false;
    }
  }

  #schedule(ms: number): void {
    if (!this.#running) return;
    this.#timer = setTimeout(() => {
      this.renew().then((ok) => this.#schedule(ok ? this.#leaseMs / 4 : 250));
    }, ms);
    this.#timer.unref();
  }
}
