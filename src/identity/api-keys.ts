import { Type } from 'typebox';
import { displayPrefix, generateApiKey, hashApiKey } from '../api-key-format.ts';
import type { Db } from '../db/database.ts';
import { findOwnedRow, type UserRef } from '../db/owned-rows.ts';
import { precompiled } from '../db/precompiled.ts';
import type { ApiKeyRow, UserRow } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { DomainError } from '../errors.ts';
import { Id, Nullable, Timestamp, WritableBody } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';
import type { Principal } from './access.ts';
import { RANK } from './roles.ts';
import { keepingAnAdministrator, lockUser } from './users.ts';

/**
 * API keys: anyone who may reach a user may list them; the user themself, an Administrator, or a
 * Team Administrator for a teammate of a lower role may revoke them; only the user themself or an
 * Administrator may mint them (docs/decisions.md, "Who may mint a key").
 */

export const ApiKey = Type.Object({
  id: Id,
  name: Type.String(),
  prefix: Type.String({ description: 'The first characters of the key, to tell keys apart' }),
  created_by: Nullable(Id),
  created_at: Timestamp,
  last_used_at: Nullable(Timestamp),
});
export const NewApiKey = Type.Object({
  ...ApiKey.properties,
  key: Type.String({ description: 'The full key. Shown in this response only: store it now.' }),
});
/** The longest name a key may have (the API's schema and the settings page's form). */
export const KEY_NAME_MAX_LENGTH = 255;
export const ApiKeyBody = WritableBody({ name: Type.String({ minLength: 1, maxLength: KEY_NAME_MAX_LENGTH }) }, [
  'id',
  'prefix',
  'created_by',
  'created_at',
  'last_used_at',
]);
export const API_KEY_FILTERS: Filters = { id: { kind: 'id', column: 'id' }, name: { kind: 'text', column: 'name' } };

export function toApiKey(row: ApiKeyRow) {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    created_by: row.created_by,
    created_at: formatTimestamp(row.created_at),
    last_used_at: formatTimestamp(row.last_used_at),
  };
}

/**
 * Only the user themself or an Administrator mints a user's keys. A key is its user's whole
 * identity — it changes their password and email, cancels their account, mints more keys — so a
 * key minted by a Team Administrator would give them what the access rule refuses them directly.
 */
export function requireMintable(principal: Principal, owner: UserRef): void {
  if (owner.id === principal.userId || principal.rank >= RANK.Administrator) return;
  throw new DomainError(
    'forbidden',
    `You may not mint keys for user ${owner.id}: only the user themself or an Administrator may, as a key acts with all of its user's rights.`,
  );
}

interface NewKeyOptions {
  /** Who makes it: the user themself, or an Administrator. */
  createdBy: number;
  now: Date;
  /** The clear key, when it is given (BOOTSTRAP_ADMIN_KEY); a new random one otherwise. */
  key?: string;
  /** Refuse the key (409) when the user already holds this many live keys (API_KEYS_PER_USER). */
  limit?: number;
}

/** Creates a key and returns it in clear with its row: the only moment the clear key exists. */
export async function createApiKey(db: Db, userId: number, name: string, options: NewKeyOptions) {
  const { createdBy, now, key = generateApiKey(), limit } = options;
  const insert = (trx: Db) =>
    trx
      .insertInto('api_keys')
      .values({ user_id: userId, name, prefix: displayPrefix(key), key_hash: hashApiKey(key), created_by: createdBy, created_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
  if (limit === undefined) return { key, row: await insert(db) };
  const row = await db.transaction().execute(async (trx) => {
    // The user's row locked: two mints at once cannot both take the last free place.
    await lockUser(trx, userId);
    const { live } = await trx
      .selectFrom('api_keys')
      .select((eb) => eb.fn.countAll<number>().as('live'))
      .where('user_id', '=', userId)
      .where('revoked_at', 'is', null)
      .executeTakeFirstOrThrow();
    if (Number(live) >= limit) {
      throw new DomainError('conflict', `User ${userId} already holds ${limit} live API keys, the most allowed: revoke one first.`);
    }
    return insert(trx);
  });
  return { key, row };
}

/** A live key with its owner, for the access rule; undefined when there is none or it was revoked. */
export function findLiveApiKey(db: Db, id: number) {
  return findOwnedRow(db, db.selectFrom('api_keys').selectAll().where('id', '=', id).where('revoked_at', 'is', null));
}

/** Every live key of a user, oldest first (the settings page lists them all). */
export async function liveApiKeys(db: Db, userId: number): Promise<ApiKeyRow[]> {
  return db.selectFrom('api_keys').selectAll().where('user_id', '=', userId).where('revoked_at', 'is', null).orderBy('id').execute();
}

/** A user's live keys, filtered by `API_KEY_FILTERS`. */
export function searchApiKeys(db: Db, userId: number, params: SearchParams) {
  const query = db.selectFrom('api_keys').selectAll().where('user_id', '=', userId).where('revoked_at', 'is', null);
  return runSearch(query, API_KEY_FILTERS, params, 'id');
}

/**
 * The authentication look-up: the key's digest to its user, in one indexed query. It runs on every
 * request, so it is compiled once (db/precompiled.ts).
 */
const keyOwner = precompiled(1, (db, keyHash: Buffer) =>
  db
    .selectFrom('api_keys')
    .innerJoin('users', 'users.id', 'api_keys.user_id')
    .selectAll('users')
    .select(['api_keys.id as key_id', 'api_keys.key_hash', 'api_keys.last_used_at as key_last_used_at', 'users.id as user_id'])
    .where('api_keys.key_hash', '=', keyHash)
    .where('api_keys.revoked_at', 'is', null)
    .where('users.deleted_at', 'is', null),
);

/** The live key with this digest and its user's whole row (`user`), or undefined. */
export async function findKeyOwner(db: Db, keyHash: Buffer) {
  const [found] = await keyOwner(db, keyHash);
  if (!found) return undefined;
  const { key_id, key_hash, key_last_used_at, user_id, ...user } = found;
  return { key_id, key_hash, last_used_at: key_last_used_at, user_id, user: Object.freeze(user) as UserRow };
}

/**
 * Revokes a live key (as `findLiveApiKey` found it, with its owner). An Administrator's key may be
 * the last means anyone has of administering the service: its revocation stands only if an
 * Administrator who can act remains (`keepingAnAdministrator`).
 */
export async function revokeApiKey(db: Db, key: { row: Pick<ApiKeyRow, 'id'>; owner: UserRef }, now: Date): Promise<void> {
  const revoke = async (trx: Db) => {
    await trx.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', key.row.id).execute();
  };
  if (key.owner.roles.includes('Administrator')) await keepingAnAdministrator(db, key.owner, 'left without a key', revoke);
  else await revoke(db);
}

export async function touchApiKey(db: Db, id: number, at: Date): Promise<void> {
  await db.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', id).execute();
}

/** The key with this digest and its holder, revoked or not (BOOTSTRAP_ADMIN_KEY is looked for so). */
export async function findKeyByDigest(db: Db, digest: Buffer): Promise<{ id: number; user_id: number } | undefined> {
  return db.selectFrom('api_keys').select(['id', 'user_id']).where('key_hash', '=', digest).executeTakeFirst();
}

/** Makes a revoked key live again (only the operator's BOOTSTRAP_ADMIN_KEY is ever restored). */
export async function restoreApiKey(db: Db, id: number): Promise<void> {
  await db.updateTable('api_keys').set({ revoked_at: null }).where('id', '=', id).execute();
}
