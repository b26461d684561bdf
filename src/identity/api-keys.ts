import type { Db } from '../db/database.ts';
import { precompiled } from '../db/precompiled.ts';
import type { ApiKeyRow } from '../db/schema.ts';
import { formatTimestamp } from '../time.ts';
import { displayPrefix, generateApiKey, hashApiKey } from './api-key-format.ts';

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

export async function findLiveApiKey(db: Db, id: number) {
  return db
    .selectFrom('api_keys')
    .innerJoin('users', 'users.id', 'api_keys.user_id')
    .selectAll('api_keys')
    .select(['users.team_id', 'users.roles'])
    .where('api_keys.id', '=', id)
    .where('api_keys.revoked_at', 'is', null)
    .where('users.deleted_at', 'is', null)
    .executeTakeFirst();
}

/**
 * The authentication look-up: the key's digest to its user, in one indexed query. It runs on every
 * request, so it is compiled once (db/precompiled.ts).
 */
const keyOwner = precompiled(1, (db, keyHash: Buffer) =>
  db
    .selectFrom('api_keys')
    .innerJoin('users', 'users.id', 'api_keys.user_id')
    .select([
      'api_keys.id as key_id',
      'api_keys.key_hash',
      'api_keys.last_used_at',
      'users.id as user_id',
      'users.team_id',
      'users.roles',
      'users.status',
      'users.cancelled_at',
    ])
    .where('api_keys.key_hash', '=', keyHash)
    .where('api_keys.revoked_at', 'is', null)
    .where('users.deleted_at', 'is', null),
);

export async function findKeyOwner(db: Db, keyHash: Buffer) {
  const [owner] = await keyOwner(db, keyHash);
  return owner;
}

export async function revokeApiKey(db: Db, id: number): Promise<void> {
  await db.updateTable('api_keys').set({ revoked_at: new Date() }).where('id', '=', id).execute();
}

export async function touchApiKey(db: Db, id: number, at: Date): Promise<void> {
  await db.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', id).execute();
}
