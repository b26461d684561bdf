import type { DomainError } from '../errors.ts';
import { backoffMs } from '../time.ts';

/**
 * True for PostgreSQL's unique_violation (23505), from pg and PGlite alike; of that index or
 * constraint only, when `constraint` names one.
 */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const violation = error as { code?: unknown; constraint?: unknown };
  return violation.code === '23505' && (constraint === undefined || violation.constraint === constraint);
}

/**
 * A write guarded by a unique index: two requests racing for one value both pass the checks
 * before it, the index decides, and the loser gets the 409 every duplicate gets (`duplicate`).
 */
export async function uniqueOn<T>(conflict: () => DomainError, write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict();
    throw error;
  }
}

/**
 * True when an error means the database is out of reach rather than refusing the statement: the
 * connection was refused, dropped or timed out, the server is shutting down (57P01–57P03), a
 * statement ran past its time limit (57014), or a connection-class SQLSTATE (08xxx). Such errors
 * are transient: requests answer 503 `database_unavailable`, workers wait and try again.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && DB_UNREACHABLE_CODES.test(code)) return true;
  return typeof message === 'string' && DB_UNREACHABLE_MESSAGES.test(message);
}

/** The level at which a failure is logged: an outage is expected and waited out (a warning), anything else an error. */
export function failureLevel(error: unknown): 'warn' | 'error' {
  return isDatabaseUnavailable(error) ? 'warn' : 'error';
}

const DB_UNREACHABLE_CODES = /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH|EPIPE|57P0[1-3]|57014|08\w{3})$/;
// node-postgres reports its own timeouts and dropped connections without a code.
const DB_UNREACHABLE_MESSAGES =
  /^(Query read timeout|Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection terminated unexpectedly|Client was closed and is not queryable)/;

/** True when PostgreSQL ended the statement's transaction to break a deadlock (40P01): trying it again is safe. */
function isDeadlockVictim(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '40P01';
}

/**
 * Runs `attempt` until it succeeds or fails for a reason other than the database being out of
 * reach; while it is out of reach, waits (250 ms, growing to 2 s) and tries again — a worker
 * pauses through an outage instead of dropping what it holds. An attempt that PostgreSQL ended to
 * break a deadlock is tried again too: `attempt` is a whole statement or transaction, and its
 * every change was undone (the sent recorder's, aborted beside a lease renewal of the same
 * claims, left them to run out and be sent twice). `giveUp` ends the waiting (the
 * process is stopping): the last error is thrown. `onWait` hears of each failed attempt (to log it).
 */
export async function whileDatabaseAway<T>(
  attempt: () => Promise<T>,
  giveUp: () => boolean = () => false,
  onWait?: (error: unknown) => void,
): Promise<T> {
  for (let failures = 1; ; failures++) {
    try {
      return await attempt();
    } catch (error) {
      if (!(isDatabaseUnavailable(error) || isDeadlockVictim(error)) || giveUp()) throw error;
      onWait?.(error);
      await new Promise((resolve) => setTimeout(resolve, backoffMs(failures, { baseMs: 250, maxMs: 2_000 })));
    }
  }
}
