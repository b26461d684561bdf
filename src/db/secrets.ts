import { randomBytes } from 'node:crypto';
import type { Db } from './database.ts';

/**
 * A named random secret, made once per database: the first process to ask stores one (a race
 * between processes is settled by the primary key — the loser's insert does nothing) and every
 * process then reads the stored value. So API and worker processes sharing a database sign and
 * check with the same key, and it survives restarts.
 */
export async function ensureSecret(db: Db, name: string, now: Date, bytes = 32): Promise<Buffer> {
  await db
    .insertInto('secrets')
    .values({ name, value: randomBytes(bytes), created_at: now })
    .onConflict((conflict) => conflict.column('name').doNothing())
    .execute();
  const row = await db.selectFrom('secrets').select('value').where('name', '=', name).executeTakeFirstOrThrow();
  return Buffer.from(row.value);
}
