import { createHash, randomBytes } from 'node:crypto';
import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import type { UserRow } from '../db/schema.ts';
import { DomainError, type FieldErrors, throwIfAny } from '../errors.ts';
import { Timestamp } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';
import { type Principal, requireManageable } from './access.ts';
import { hashPassword, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from './passwords.ts';
import { setPasswordHash } from './users.ts';

/**
 * Invitations: a new user sets their own first password through a one-time link that whoever may
 * manage them (identity/access.ts) makes and sends. Only for a user without a password, so a
 * Team Administrator can never take over an account already in use; the token is random, kept as
 * its SHA-256, single use, and expires after INVITATION_LIFETIME_MS. A new invitation replaces the
 * user's unused ones.
 */
const INVITATION_LIFETIME_MS = 7 * 24 * 60 * 60_000;

export const Invitation = Type.Object(
  {
    url: Type.String({ description: 'The link to send the user: /invitation/{token}, shown only in this response' }),
    expires_at: Timestamp,
  },
  { title: 'Invitation' },
);

const hashToken = (token: string) => createHash('sha256').update(token).digest();

export async function createInvitation(db: Db, principal: Principal, target: UserRow, publicUrl: string, now: Date) {
  requireManageable(principal, target, 'invite');
  if (target.password_hash !== null) {
    throw new DomainError('conflict', `User ${target.id} has a password already; they change it themselves at /account/settings.`);
  }
  if (target.status !== 'Active') throw new DomainError('conflict', `User ${target.id} is not active.`);
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(now.getTime() + INVITATION_LIFETIME_MS);
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('user_invitations').where('user_id', '=', target.id).where('used_at', 'is', null).execute();
    await trx
      .insertInto('user_invitations')
      .values({ user_id: target.id, token_hash: hashToken(token), created_by: principal.userId, created_at: now, expires_at: expiresAt })
      .execute();
  });
  return { url: `${publicUrl}/invitation/${token}`, expires_at: formatTimestamp(expiresAt) };
}

/** The user an unused, unexpired invitation is for, or undefined. */
export async function findInvitation(db: Db, token: string, now: Date) {
  if (token.length > 100) return undefined;
  return db
    .selectFrom('user_invitations')
    .innerJoin('users', 'users.id', 'user_invitations.user_id')
    .select(['user_invitations.id', 'users.id as user_id', 'users.email', 'users.first_name'])
    .where('user_invitations.token_hash', '=', hashToken(token))
    .where('user_invitations.used_at', 'is', null)
    .where('user_invitations.expires_at', '>', now)
    .where('users.deleted_at', 'is', null)
    .executeTakeFirst();
}

/**
 * Sets the invited user's first password and spends the invitation, in one transaction: the
 * invitation row is claimed by an UPDATE … WHERE used_at IS NULL, so two tabs racing use it once.
 * Returns the user's id, or undefined when the link is unknown, used or expired.
 */
export async function acceptInvitation(db: Db, token: string, password: string, now: Date): Promise<number | undefined> {
  const errors: FieldErrors = {};
  if (password.length < PASSWORD_MIN_LENGTH || password.length > PASSWORD_MAX_LENGTH) {
    errors.password = [`must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters`];
  }
  throwIfAny(errors);
  if (token.length > 100) return undefined;
  const hash = await hashPassword(password);
  return db.transaction().execute(async (trx) => {
    const claimed = await trx
      .updateTable('user_invitations')
      .set({ used_at: now })
      .where('token_hash', '=', hashToken(token))
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .returning('user_id')
      .executeTakeFirst();
    if (!claimed) return undefined;
    await setPasswordHash(trx, claimed.user_id, hash, now);
    return claimed.user_id;
  });
}
