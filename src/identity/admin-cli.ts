import { parseArgs } from 'node:util';
import { generateApiKey } from '../api-key-format.ts';
import { ConfigError, loadConfig } from '../config.ts';
import { type DatabaseHandle, openDatabase } from '../db/database.ts';
import { DatabaseInUseError } from '../db/pglite-lock.ts';
import { systemClock } from '../time.ts';
import { createApiKey } from './api-keys.ts';
import { generatePassword, hashPassword } from './passwords.ts';
import { activeAdministrators, findUserByEmail, insertUser, setPasswordHash } from './users.ts';

/**
 * `npm run admin -- …`: the operator's way in from the server's own shell, with the service's
 * environment (DATA_DIR, or DATABASE_URL and DATABASE_SCHEMA), for when no key or password is at
 * hand — a first start that was never seen, a key lost. It speaks to the database directly, as
 * whoever can run it can read the data anyway. What it prints for a person goes to stderr; the
 * key or password alone to stdout, so that `KEY=$(npm run --silent admin -- create-key …)` works.
 * docs/operations.md, "Locked out".
 */
const USAGE = `usage: npm run admin -- COMMAND
  create-key EMAIL [--name TEXT]   mint an API key for the Administrator EMAIL (made one if no user has EMAIL)
  set-password EMAIL               give user EMAIL a new web sign-in password (their browsers are signed out)
  list                             the active Administrators, with their keys and whether they have a password
  generate-key                     print a new key, stored nowhere: a value for BOOTSTRAP_ADMIN_KEY
With the embedded database (no DATABASE_URL), stop Hopper first: PGlite allows one process at a time.`;

class UsageError extends Error {}
/** What the operator asked for cannot be done; the message says why and what to do instead. */
class Refusal extends Error {}

async function run(argv: string[]): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { name: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  const [command, email, ...rest] = positionals;
  if (values.help) {
    console.log(USAGE);
    return;
  }
  if (command === 'generate-key' && positionals.length === 1) {
    console.log(generateApiKey());
    return;
  }
  const needsEmail = command === 'create-key' || command === 'set-password';
  if (!(needsEmail || command === 'list') || (needsEmail ? !email || rest.length > 0 : positionals.length > 1)) {
    throw new UsageError(USAGE);
  }
  const config = loadConfig();
  const database = await openDatabase(config);
  try {
    if (command === 'create-key') await createKey(database, email as string, values.name ?? 'Created with npm run admin');
    else if (command === 'set-password') await setPassword(database, email as string, config.publicUrl);
    else await list(database);
  } finally {
    await database.close();
  }
}

async function createKey({ db }: DatabaseHandle, email: string, name: string): Promise<void> {
  const now = systemClock();
  let user = await findUserByEmail(db, email);
  if (!user) {
    user = await insertUser(db, {
      first_name: 'Hopper',
      last_name: 'Administrator',
      email,
      roles: ['Administrator'],
      created_at: now,
      updated_at: now,
    });
    console.error(`No user had ${email}: made user ${user.id}, an Administrator.`);
  } else if (!user.roles.includes('Administrator') || user.status !== 'Active') {
    throw new Refusal(
      `${user.email} (user ${user.id}) is not an active Administrator (${user.status}, ${user.roles.join(', ')}): ` +
        'name one (npm run admin -- list), or a new address to make an Administrator with it.',
    );
  }
  const { key } = await createApiKey(db, user.id, name, { createdBy: user.id, now });
  console.error(`An API key for ${user.email} (Administrator, user ${user.id}), shown this once:\n`);
  console.log(key);
  console.error('\nUse it as "Authorization: Bearer <key>"; revoke it with DELETE /v3/api_keys/{id} once you have made your own.');
}

async function setPassword({ db }: DatabaseHandle, email: string, publicUrl: string): Promise<void> {
  const user = await findUserByEmail(db, email);
  if (!user) throw new Refusal(`No user has the email address ${email} (npm run admin -- list names the Administrators).`);
  const password = generatePassword();
  await setPasswordHash(db, user.id, await hashPassword(password), systemClock());
  console.error(`A new password for ${user.email} (user ${user.id}), shown this once; their browsers were signed out:\n`);
  console.log(password);
  console.error(`\nSign in at ${publicUrl}/login; change it under ${publicUrl}/account/settings.`);
}

async function list({ db }: DatabaseHandle): Promise<void> {
  const admins = await activeAdministrators(db);
  if (admins.length === 0) {
    console.log('No active Administrator: npm run admin -- create-key admin@localhost makes one.');
    return;
  }
  for (const admin of admins) {
    const keys = Number(admin.live_keys);
    console.log(
      `${admin.id}\t${admin.email}\t${keys} live API key${keys === 1 ? '' : 's'}\t${admin.has_password ? 'password set' : 'no password'}`,
    );
  }
}

try {
  await run(process.argv.slice(2));
} catch (error) {
  if (error instanceof DatabaseInUseError) {
    console.error(
      `${error.message}\nStop Hopper first (Ctrl-C where it runs), then run this again; Hopper's next start goes on as before.`,
    );
    process.exit(2);
  }
  const known = error instanceof UsageError || error instanceof ConfigError || error instanceof Refusal;
  console.error(known ? error.message : error);
  process.exit(error instanceof Refusal ? 1 : known ? 2 : 1);
}
