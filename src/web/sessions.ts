import { createHash, randomBytes } from 'node:crypto';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { UserRow } from '../db/schema.ts';
import { DomainError } from '../errors.ts';
import {
  deleteSession,
  deleteStaleSessions,
  findSessionByTokenHash,
  insertSession,
  type SessionUser,
  touchSession,
} from '../identity/web-sessions.ts';
import { sessionCsrfToken } from './csrf.ts';
import { flashKey } from './flash.ts';

/**
 * Web sessions live in the database so any API process can serve any page. The cookie holds a
 * random token; the table holds only its SHA-256, so reading the table signs nobody in.
 * `__Host-` makes the browser refuse the cookie unless it is Secure, host-only and for path /.
 */
export const SESSION_COOKIE = '__Host-hopper_session';
/** A session unused for this long ends (the settings page holds API keys: keep it short). */
export const IDLE_TIMEOUT_MS = 60 * 60_000;
/** A session ends this long after sign-in however busy it is. */
const ABSOLUTE_LIFETIME_MS = 12 * 60 * 60_000;
/** `last_seen_at` is written at most once a minute, so page views stay read-only on the hot path. */
const TOUCH_GRANULARITY_MS = 60_000;

export interface WebSession {
  readonly id: number;
  readonly user: SessionUser;
  /** The token every form of this session must carry (see csrf.ts). */
  readonly csrfToken: string;
  /** The key that seals this session's one-time messages (flash.ts). */
  readonly flashKey: Buffer;
}

const hashToken = (token: string) => createHash('sha256').update(token).digest();

/**
 * A cancelled account keeps reads and deletes for its grace period, as the API's keys do
 * (http/authenticate.ts): anything else a form would change is refused, saying `what` it may do.
 */
export function refuseCancelled(session: Pick<WebSession, 'user'>, what: string): void {
  if (session.user.status === 'Cancelled') throw new DomainError('forbidden', `A cancelled account can ${what}.`);
}

/** When a cancelled account loses access altogether; null for an active account. */
export function graceEndsAt(user: Pick<UserRow, 'status' | 'cancelled_at'>, config: Config): Date | null {
  if (user.status !== 'Cancelled' || !user.cancelled_at) return null;
  return new Date(user.cancelled_at.getTime() + config.gracePeriodMs);
}

/** Starts a session and returns the token for the cookie: the only moment it exists in clear. */
export async function startSession(db: Db, userId: number, now: Date): Promise<{ token: string; expiresAt: Date }> {
  // Sessions nobody came back to are removed here rather than by a job; the indexes keep it cheap.
  await deleteStaleSessions(db, now, new Date(now.getTime() - IDLE_TIMEOUT_MS));
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(now.getTime() + ABSOLUTE_LIFETIME_MS);
  await insertSession(db, userId, hashToken(token), now, expiresAt);
  return { token, expiresAt };
}

/**
 * The live session for a cookie token, or null. A session past its idle or absolute limit, of a
 * deleted user, or of a cancelled account past its grace period is removed on sight.
 */
export async function findSession(db: Db, config: Config, token: string | undefined, now: Date): Promise<WebSession | null> {
  if (!token || token.length > 100) return null;
  const session = await findSessionByTokenHash(db, hashToken(token));
  if (!session) return null;
  const { id, user } = session;
  const idle = now.getTime() - session.lastSeenAt.getTime();
  const graceEnd = graceEndsAt(user, config);
  if (session.userDeletedAt || now >= session.expiresAt || idle >= IDLE_TIMEOUT_MS || (graceEnd && now >= graceEnd)) {
    await endSession(db, id);
    return null;
  }
  if (idle >= TOUCH_GRANULARITY_MS) await touchSession(db, id, now);
  return { id, user, csrfToken: sessionCsrfToken(token), flashKey: flashKey(token) };
}

export async function endSession(db: Db, id: number): Promise<void> {
  await deleteSession(db, id);
}
