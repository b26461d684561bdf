import type { Db } from '../db/database.ts';
import type { UserRow } from '../db/schema.ts';

/**
 * Every statement on `web_sessions`: the browser sessions of web/sessions.ts (which keeps the
 * cookie, the limits and the CSRF token), kept here so that identity's own writes can end a user's
 * sessions (a new password signs them out everywhere).
 */

/** The user fields a page needs. */
export type SessionUser = Pick<
  UserRow,
  'id' | 'first_name' | 'last_name' | 'email' | 'roles' | 'team_id' | 'time_zone' | 'status' | 'cancelled_at'
>;

export async function insertSession(db: Db, userId: number, tokenHash: Buffer, now: Date, expiresAt: Date): Promise<void> {
  await db
    .insertInto('web_sessions')
    .values({ user_id: userId, token_hash: tokenHash, created_at: now, last_seen_at: now, expires_at: expiresAt })
    .execute();
}

/** Removes the sessions past their absolute lifetime, or unused since `idleSince`. */
export async function deleteStaleSessions(db: Db, now: Date, idleSince: Date): Promise<void> {
  await db
    .deleteFrom('web_sessions')
    .where((eb) => eb.or([eb('expires_at', '<=', now), eb('last_seen_at', '<=', idleSince)]))
    .execute();
}

/** The session of a token's digest with its user (deleted or not: the caller decides). */
export async function findSessionByTokenHash(db: Db, tokenHash: Buffer) {
  const row = await db
    .selectFrom('web_sessions')
    .innerJoin('users', 'users.id', 'web_sessions.user_id')
    .select(['web_sessions.id as session_id', 'web_sessions.last_seen_at', 'web_sessions.expires_at', 'users.deleted_at'])
    .select(['users.id', 'users.first_name', 'users.last_name', 'users.email', 'users.roles', 'users.team_id'])
    .select(['users.time_zone', 'users.status', 'users.cancelled_at'])
    .where('web_sessions.token_hash', '=', tokenHash)
    .executeTakeFirst();
  if (!row) return undefined;
  const { session_id, last_seen_at, expires_at, deleted_at, ...user } = row;
  return { id: session_id, lastSeenAt: last_seen_at, expiresAt: expires_at, userDeletedAt: deleted_at, user: user satisfies SessionUser };
}

export async function touchSession(db: Db, id: number, now: Date): Promise<void> {
  await db.updateTable('web_sessions').set({ last_seen_at: now }).where('id', '=', id).execute();
}

export async function deleteSession(db: Db, id: number): Promise<void> {
  await db.deleteFrom('web_sessions').where('id', '=', id).execute();
}

/** Signs a user out of every browser. */
export async function endUserSessions(db: Db, userId: number): Promise<void> {
  await db.deleteFrom('web_sessions').where('user_id', '=', userId).execute();
}

/** Leaves a sealed one-time message on a session for its next page (web/flash.ts). */
export async function storeSessionFlash(db: Db, id: number, sealed: Buffer): Promise<void> {
  await db.updateTable('web_sessions').set({ flash: sealed }).where('id', '=', id).execute();
}

/**
 * Takes a session's waiting message and clears it in one statement, so two requests racing for it
 * never both get it: the row is locked, read and emptied together.
 */
export async function takeSessionFlash(db: Db, id: number): Promise<Buffer | null> {
  const row = await db
    .with('old', (q) =>
      q.selectFrom('web_sessions').select(['id', 'flash']).where('id', '=', id).where('flash', 'is not', null).forUpdate(),
    )
    .updateTable('web_sessions')
    .from('old')
    .set({ flash: null })
    .whereRef('web_sessions.id', '=', 'old.id')
    .returning('old.flash')
    .executeTakeFirst();
  return row?.flash ?? null;
}
