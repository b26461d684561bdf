import { setImmediate, setTimeout } from 'node:timers/promises';
import { type DatabaseConnection, type Driver, PGliteDialect, type PGliteDialectConfig, PGliteDriver } from 'kysely';

/**
 * How long PGlite's one connection must have been free before background work takes it: longer
 * than a request leaves it between two of its statements (some tenths of a millisecond of
 * JavaScript on a quiet machine).
 */
const PAUSE_MS = 2;
/** The longest background work waits for such a pause: requests that never leave one still let it go on. */
const MAX_WAIT_MS = 100;

/**
 * PGlite's one connection, which every request shares and whose statements run on the event loop.
 * Kysely hands it out a statement (or a transaction) at a time, first come first served: a request
 * of four statements found a bulk import's next batch (some 25 ms of CPU) before each of them, and
 * waited for four. Background work that holds the connection long calls `quiet()` before each
 * piece: it then goes when the requests using the connection have made their last statement, and a
 * request waits for one piece at most, the one running when it came.
 */
export class OneConnection {
  #held = false;
  #freedAt = Number.NEGATIVE_INFINITY;

  /**
   * Resolves once the connection has been free for PAUSE_MS, or after MAX_WAIT_MS whatever the
   * requests do.
   */
  async quiet(): Promise<void> {
    const deadline = performance.now() + MAX_WAIT_MS;
    for (;;) {
      // Two turns of the event loop first. A request that came while the connection was held (a
      // batch runs in one turn) is read only when the loop next polls for I/O, after the timers:
      // measured from the end of that turn alone, the pause would be over before the request was
      // even read. Polled twice, it has taken the connection by the time this looks.
      await setImmediate();
      await setImmediate();
      const now = performance.now();
      const free = this.#held ? 0 : now - this.#freedAt;
      if (free >= PAUSE_MS || now >= deadline) return;
      await setTimeout(Math.min(PAUSE_MS - free, deadline - now));
    }
  }

  /** Kysely's PGlite dialect, telling this when the connection is taken and given back. */
  dialect(config: PGliteDialectConfig): PGliteDialect {
    const use = this;
    return new (class extends PGliteDialect {
      override createDriver(): Driver {
        return new WatchedDriver(config, use);
      }
    })(config);
  }

  taken(): void {
    this.#held = true;
  }

  freed(): void {
    this.#held = false;
    this.#freedAt = performance.now();
  }
}

class WatchedDriver extends PGliteDriver {
  readonly #use: OneConnection;

  constructor(config: PGliteDialectConfig, use: OneConnection) {
    super(config);
    this.#use = use;
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await super.acquireConnection();
    this.#use.taken();
    return connection;
  }

  override async releaseConnection(): Promise<void> {
    this.#use.freed();
    await super.releaseConnection();
  }
}
