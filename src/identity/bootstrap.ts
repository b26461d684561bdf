import { sql } from 'kysely';
import { hashApiKey } from '../api-key-format.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { NewUser } from '../db/schema.ts';
import { createApiKey } from './api-keys.ts';
import { generatePassword, hashPassword } from './passwords.ts';
import type { RoleName } from './roles.ts';
import { emailTaken, insertUser } from './users.ts';

export type BootstrapResult =
  | { kind: 'none' }
  | { kind: 'configured-key'; userId: number }
  | { kind: 'first-start'; userId: number; email: string; key: string; password: string };

const ADMIN: NewUser = { first_name: 'Hopper', last_name: 'Administrator', email: 'admin@localhost', roles: ['Administrator'] };

/**
 * Makes sure someone can call the API. With BOOTSTRAP_ADMIN_KEY, an active Administrator holds
 * that key after every start, whatever the database holds (the operator's way back in: see
 * holdConfiguredKey). Without it, the first
 * start on an empty database creates an Administrator and returns its fresh key and web sign-in
 * password to print once.
 * A transaction-scoped advisory lock makes concurrent starts on one PostgreSQL do this once.
 */
export async function bootstrapAdministrator(db: Db, config: Config): Promise<BootstrapResult> {
  return db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext('hopper:bootstrap'))`.execute(trx);

    if (config.bootstrapAdminKey) return { kind: 'configured-key', userId: await holdConfiguredKey(trx, config.bootstrapAdminKey) };

    const anyone = await trx.selectFrom('users').select('id').limit(1).executeTakeFirst();
    if (anyone) return { kind: 'none' };
    const password = generatePassword();
    const admin = await insertUser(trx, { ...ADMIN, password_hash: await hashPassword(password) });
    const { key } = await createApiKey(trx, admin.id, 'First-start key', { createdBy: admin.id, now: new Date() });
    return { kind: 'first-start', userId: admin.id, email: admin.email, key, password };
  });
}

/**
 * BOOTSTRAP_ADMIN_KEY, made to work: the key is live (restored if it was revoked), and its holder
 * is an active Administrator — reinstated if it was cancelled, deleted or demoted. A key not in the
 * database yet goes to the first active Administrator, or to a new one (under a free
 * `admin@localhost` address) when there is none. Returns the holder's id.
 */
async function holdConfiguredKey(trx: Db, key: string): Promise<number> {
  const now = new Date();
  const existing = await trx.selectFrom('api_keys').select(['id', 'user_id']).where('key_hash', '=', hashApiKey(key)).executeTakeFirst();
  if (existing) {
    await trx.updateTable('api_keys').set({ revoked_at: null }).where('id', '=', existing.id).execute();
    await trx
      .updateTable('users')
      .set({
        status: 'Active',
        cancelled_at: null,
        deleted_at: null,
        roles: sql<RoleName[]>`CASE WHEN 'Administrator' = ANY (roles) THEN roles ELSE array_append(roles, 'Administrator') END`,
        updated_at: now,
      })
      .where('id', '=', existing.user_id)
      .where((eb) =>
        eb.or([eb('status', '!=', 'Active'), eb('deleted_at', 'is not', null), sql<boolean>`NOT ('Administrator' = ANY (roles))`]),
      )
      .execute();
    return existing.user_id;
  }
  const admin =
    (await trx
      .selectFrom('users')
      .select('id')
      .where(sql<boolean>`'Administrator' = ANY (roles)`)
      .where('deleted_at', 'is', null)
      .where('status', '=', 'Active')
      .orderBy('id')
      .executeTakeFirst()) ?? (await insertUser(trx, { ...ADMIN, email: await freeAdminEmail(trx) }));
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
