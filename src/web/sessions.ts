import { createHash, randomBytes } from 'node:crypto';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { UserRow } from '../db/schema.ts';
import { sessionCsrfToken } from './csrf.ts';

/**
 * Web sessions live in the database so any API process can serve any page. The cookie holds a
 * random token; the table holds only its SHA-256, so reading the table signs nobody in.
 * `__Host-` makes the browser refuse the cookie unless it is Secure, host-only and for path /.
 */
export const SESSION_COOKIE = '__Host-hopper_session';
/** A session unused for this long ends (the settings page holds API keys: keep it short). */
export const IDLE_TIMEOUT_MS = 60 * 60_000;
/** A session ends this long after sign-in however busy it is. */
export const ABSOLUTE_LIFETIME_MS = 12 * 60 * 60_000;
/** `last_seen_at` is written at most once a minute, so page views stay read-only on the hot path. */
const TOUCH_GRANULARITY_MS = 60_000;

export type SessionUser = Pick<
  UserRow,
  'id' | 'first_name' | 'last_name' | 'email' | 'roles' | 'team_id' | 'time_zone' | 'status' | 'cancelled_at'
>;

export interface WebSession {
  readonly id: number;
  readonly user: SessionUser;
  /** The token every form of this session must carry (see csrf.ts). */
  readonly csrfToken: string;
}

const hashToken = (token: string) => createHash('sha256').update(token).digest();

/** When a cancelled account loses access altogether; null for an active account. */
export function graceEndsAt(user: Pick<UserRow, 'status' | 'cancelled_at'>, config: Config): Date | null {
  if (user.status !== 'Cancelled' || !user.cancelled_at) return null;
  return new Date(user.cancelled_at.getTime() + config.gracePeriodMs);
}

/** Starts a session and returns the token for the cookie: the only moment it exists in clear. */
export async function startSession(db: Db, userId: number, now: Date): Promise<{ token: string; expiresAt: Date }> {
  // Sessions nobody came back to are removed here rather than by a job; the indexes keep it cheap.
  await db
    .deleteFrom('web_sessions')
    .where((eb) => eb.or([eb('expires_at', '<=', now), eb('last_seen_at', '<=', new Date(now.getTime() - IDLE_TIMEOUT_MS))]))
    .execute();
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(now.getTime() + ABSOLUTE_LIFETIME_MS);
  await db
    .insertInto('web_sessions')
    .values({ user_id: userId, token_hash: hashToken(token), created_at: now, last_seen_at: now, expires_at: expiresAt })
    .execute();
  return { token, expiresAt };
}

/**
 * The live session for a cookie token, or null. A session past its idle or absolute limit, of a
 * deleted user, or of a cancelled account past its grace period is removed on sight.
 */
export async function findSession(db: Db, config: Config, token: string | undefined, now: Date): Promise<WebSession | null> {
  if (!token || token.length > 100) return null;
  const row = await db
    .selectFrom('web_sessions')
    .innerJoin('users', 'users.id', 'web_sessions.user_id')
    .select(['web_sessions.id as session_id', 'web_sessions.last_seen_at', 'web_sessions.expires_at', 'users.deleted_at'])
    .select(['users.id', 'users.first_name', 'users.last_name', 'users.email', 'users.roles', 'users.team_id'])
    .select(['users.time_zone', 'users.status', 'users.cancelled_at'])
    .where('web_sessions.token_hash', '=', hashToken(token))
    .executeTakeFirst();
  if (!row) return null;
  const { session_id, last_seen_at, expires_at, deleted_at, ...user } = row;
  const idle = now.getTime() - last_seen_at.getTime();
  const graceEnd = graceEndsAt(user, config);
  if (deleted_at || now >= expires_at || idle >= IDLE_TIMEOUT_MS || (graceEnd && now >= graceEnd)) {
    await endSession(db, session_id);
    return null;
  }
  if (idle >= TOUCH_GRANULARITY_MS) {
    await db.updateTable('web_sessions').set({ last_seen_at: now }).where('id', '=', session_id).execute();
  }
  return { id: session_id, user, csrfToken: sessionCsrfToken(token) };
}

export async function endSession(db: Db, id: number): Promise<void> {
  await db.deleteFrom('web_sessions').where('id', '=', id).execute();
}
