import { sql } from 'kysely';
import { hashApiKey } from '../api-key-format.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { NewUser } from '../db/schema.ts';
import { type Clock, systemClock } from '../time.ts';
import { createApiKey, findKeyByDigest, restoreApiKey } from './api-keys.ts';
import { generatePassword, hashPassword } from './passwords.ts';
import { anyUserExists, emailTaken, firstActiveAdministrator, insertUser, reinstateAdministrator } from './users.ts';

export type BootstrapResult =
  | { kind: 'none' }
  | { kind: 'configured-key'; userId: number }
  | { kind: 'first-start'; userId: number; email: string; key: string; password: string };

const ADMIN: Omit<NewUser, 'created_at' | 'updated_at'> = {
  first_name: 'Hopper',
  last_name: 'Administrator',
  email: 'admin@localhost',
  roles: ['Administrator'],
};

/**
 * Makes sure someone can call the API. With BOOTSTRAP_ADMIN_KEY, an active Administrator holds
 * that key after every start, whatever the database holds (the operator's way back in: see
 * holdConfiguredKey). Without it, the first
 * start on an empty database creates an Administrator and returns its fresh key and web sign-in
 * password to print once.
 * A transaction-scoped advisory lock makes concurrent starts on one PostgreSQL do this once.
 */
export async function bootstrapAdministrator(db: Db, config: Config, clock: Clock = systemClock): Promise<BootstrapResult> {
  return db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext('hopper:bootstrap'))`.execute(trx);
    const now = clock();

    if (config.bootstrapAdminKey) return { kind: 'configured-key', userId: await holdConfiguredKey(trx, config.bootstrapAdminKey, now) };

    if (await anyUserExists(trx)) return { kind: 'none' };
    const password = generatePassword();
    const admin = await insertUser(trx, { ...ADMIN, password_hash: await hashPassword(password), created_at: now, updated_at: now });
    const { key } = await createApiKey(trx, admin.id, 'First-start key', { createdBy: admin.id, now });
    return { kind: 'first-start', userId: admin.id, email: admin.email, key, password };
  });
}

/**
 * BOOTSTRAP_ADMIN_KEY, made to work: the key is live (restored if it was revoked), and its holder
 * is an active Administrator — reinstated if it was cancelled, deleted or demoted. A key not in the
 * database yet goes to the first active Administrator, or to a new one (under a free
 * `admin@localhost` address) when there is none. Returns the holder's id.
 */
async function holdConfiguredKey(trx: Db, key: string, now: Date): Promise<number> {
  const existing = await findKeyByDigest(trx, hashApiKey(key));
  if (existing) {
    await restoreApiKey(trx, existing.id);
    await reinstateAdministrator(trx, existing.user_id, now);
    return existing.user_id;
  }
  const admin =
    (await firstActiveAdministrator(trx)) ??
    (await insertUser(trx, { ...ADMIN, email: await freeAdminEmail(trx), created_at: now, updated_at: now }));
  await createApiKey(trx, admin.id, 'Bootstrap key (BOOTSTRAP_ADMIN_KEY)', { createdBy: admin.id, now, key });
  return admin.id;
}

/** `admin@localhost`, or `admin-2@localhost`, … when a user (cancelled, say) already has it. */
async function freeAdminEmail(trx: Db): Promise<string> {
  for (let n = 1; ; n++) {
    const email = n === 1 ? ADMIN.email : `admin-${n}@localhost`;
    if (!(await emailTaken(trx, email))) return email;
  }
}
