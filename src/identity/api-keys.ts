import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import { findOwnedRow } from '../db/owned-rows.ts';
import { precompiled } from '../db/precompiled.ts';
import type { ApiKeyRow, UserRow } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { Id, Nullable, Timestamp, WritableBody } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';
import { displayPrefix, generateApiKey, hashApiKey } from './api-key-format.ts';

/** API keys: anyone who may reach a user may list, create and revoke that user's keys. */

export const ApiKey = Type.Object({
  id: Id,
  name: Type.String(),
  prefix: Type.String({ description: 'The first characters of the key, to tell keys apart' }),
  created_at: Timestamp,
  last_used_at: Nullable(Timestamp),
});
export const NewApiKey = Type.Object({
  ...ApiKey.properties,
  key: Type.String({ description: 'The full key. Shown in this response only: store it now.' }),
});
export const ApiKeyBody = WritableBody({ name: Type.String({ minLength: 1, maxLength: 255 }) }, [
  'id',
  'prefix',
  'created_at',
  'last_used_at',
]);
export const API_KEY_FILTERS: Filters = { id: { kind: 'id', column: 'id' }, name: { kind: 'text', column: 'name' } };

export function toApiKey(row: ApiKeyRow) {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    created_at: formatTimestamp(row.created_at),
    last_used_at: formatTimestamp(row.last_used_at),
  };
}

/** Creates a key and returns it in clear with its row: the only moment the clear key exists. */
export async function createApiKey(db: Db, userId: number, name: string, key = generateApiKey()) {
  const row = await db
    .insertInto('api_keys')
    .values({ user_id: userId, name, prefix: displayPrefix(key), key_hash: hashApiKey(key) })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { key, row };
}

/** A live key with its owner, for the access rule; undefined when there is none or it was revoked. */
export function findLiveApiKey(db: Db, id: number) {
  return findOwnedRow(db, 'api_keys', id);
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

export async function revokeApiKey(db: Db, id: number, now: Date): Promise<void> {
  await db.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', id).execute();
}

export async function touchApiKey(db: Db, id: number, at: Date): Promise<void> {
  await db.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', id).execute();
}
