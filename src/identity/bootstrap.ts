import { sql } from 'kysely';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { NewUser } from '../db/schema.ts';
import { hashApiKey } from './api-key-format.ts';
import { createApiKey } from './api-keys.ts';
import { generatePassword, hashPassword } from './passwords.ts';
import { insertUser } from './users.ts';

export type BootstrapResult =
  | { kind: 'none' }
  | { kind: 'configured-key'; userId: number }
  | { kind: 'first-start'; userId: number; email: string; key: string; password: string };

const ADMIN: NewUser = { first_name: 'Hopper', last_name: 'Administrator', email: 'admin@localhost', roles: ['Administrator'] };

/**
 * Makes sure someone can call the API. With BOOTSTRAP_ADMIN_KEY, an Administrator holds that key
 * (created on first sight; a key revoked through the API stays revoked). Without it, the first
 * start on an empty database creates an Administrator and returns its fresh key and web sign-in
 * password to print once.
 * A transaction-scoped advisory lock makes concurrent starts on one PostgreSQL do this once.
 */
export async function bootstrapAdministrator(db: Db, config: Config): Promise<BootstrapResult> {
  return db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext('hopper:bootstrap'))`.execute(trx);

    if (config.bootstrapAdminKey) {
      const existing = await trx
        .selectFrom('api_keys')
        .select('user_id')
        .where('key_hash', '=', hashApiKey(config.bootstrapAdminKey))
        .executeTakeFirst();
      if (existing) return { kind: 'configured-key', userId: existing.user_id };
      const admin =
        (await trx
          .selectFrom('users')
          .select('id')
          .where(sql<boolean>`'Administrator' = ANY (roles)`)
          .where('deleted_at', 'is', null)
          .where('status', '=', 'Active')
          .orderBy('id')
          .executeTakeFirst()) ?? (await insertUser(trx, ADMIN));
      await createApiKey(trx, admin.id, 'Bootstrap key (BOOTSTRAP_ADMIN_KEY)', config.bootstrapAdminKey);
      return { kind: 'configured-key', userId: admin.id };
    }

    const anyone = await trx.selectFrom('users').select('id').limit(1).executeTakeFirst();
    if (anyone) return { kind: 'none' };
    const password = generatePassword();
    const admin = await insertUser(trx, { ...ADMIN, password_hash: await hashPassword(password) });
    const { key } = await createApiKey(trx, admin.id, 'First-start key');
    return { kind: 'first-start', userId: admin.id, email: admin.email, key, password };
  });
}
