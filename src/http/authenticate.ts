import { timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { Principal } from '../identity/access.ts';
import { hashApiKey, parseApiKey } from '../identity/api-key-format.ts';
import { findKeyOwner, touchApiKey } from '../identity/api-keys.ts';
import { rankOf } from '../identity/roles.ts';
import { type Clock, formatTimestamp } from '../time.ts';
import { HttpError } from './problems.ts';

/** `last_used_at` is written at most once a minute per key, so reads stay read-only on the hot path. */
const LAST_USED_GRANULARITY_MS = 60_000;
const READ_AND_DELETE = new Set(['GET', 'HEAD', 'DELETE']);

function unauthorized(message: string, error?: 'invalid_token'): HttpError {
  const challenge = error ? `Bearer realm="hopper", error="${error}"` : 'Bearer realm="hopper"';
  return new HttpError('unauthorized', message, { headers: { 'WWW-Authenticate': challenge } });
}

/**
 * Bearer authentication for every non-public route. A key whose form or checksum is wrong is
 * refused before any database work. Then the account's state: a cancelled account keeps reads
 * and deletes for the grace period (so its owner can take data out), then loses everything.
 */
export async function authenticate(request: FastifyRequest, db: Db, config: Config, clock: Clock): Promise<Principal> {
  const header = request.headers.authorization;
  if (!header) throw unauthorized('Send your API key in the header Authorization: Bearer <API key>.');
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match) throw unauthorized('The Authorization header must use the Bearer scheme: Authorization: Bearer <API key>.', 'invalid_token');
  const key = parseApiKey(match[1] as string);
  if (!key) throw unauthorized('The API key is malformed: check that it was copied whole.', 'invalid_token');

  const digest = hashApiKey(key);
  const owner = await findKeyOwner(db, digest);
  if (!owner || !timingSafeEqual(owner.key_hash, digest)) {
    throw unauthorized('The API key is unknown or has been revoked.', 'invalid_token');
  }

  const now = clock();
  if (owner.status === 'Cancelled' && owner.cancelled_at) {
    const graceEnds = new Date(owner.cancelled_at.getTime() + config.gracePeriodMs);
    const cancelled = formatTimestamp(owner.cancelled_at);
    if (now >= graceEnds) {
      throw new HttpError(
        'account_cancelled',
        `This account was cancelled at ${cancelled} and its grace period ended at ${formatTimestamp(graceEnds)}.`,
      );
    }
    if (!READ_AND_DELETE.has(request.method)) {
      throw new HttpError(
        'account_cancelled',
        `This account was cancelled at ${cancelled} and is read-only until ${formatTimestamp(graceEnds)}: reads and deletes still work so you can take your data out.`,
      );
    }
  }

  if (!owner.last_used_at || now.getTime() - owner.last_used_at.getTime() >= LAST_USED_GRANULARITY_MS) {
    await touchApiKey(db, owner.key_id, now);
  }
  return { userId: owner.user_id, teamId: owner.team_id, rank: rankOf(owner.roles), keyId: owner.key_id };
}
