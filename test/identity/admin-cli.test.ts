import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sql } from 'kysely';
import { parseApiKey } from '../../src/api-key-format.ts';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { verifyPassword } from '../../src/identity/passwords.ts';
import { findSignInUser } from '../../src/identity/users.ts';
import { freePort, startHopper, stopHopper, WASM_FLAGS } from '../sending/support/hopper-process.ts';
import { waitFor } from '../sending/support/wait.ts';
import { seedPgliteDataDir } from '../support/pglite-template.ts';
import { testConfigEnv, usingPostgres } from '../support/test-app.ts';

/**
 * `npm run admin`, the operator's way in from the server's shell (docs/operations.md, "Locked
 * out"), run as a process of its own on the suite's database — PGlite in a fresh DATA_DIR, or a
 * fresh schema of DATABASE_URL's PostgreSQL — beside a real Hopper that then takes the key.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const CLI = join(ROOT, 'src', 'identity', 'admin-cli.ts');

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], env: Record<string, string>): Promise<Ran> {
  const { DATABASE_URL: _url, DATABASE_SCHEMA: _schema, ...inherited } = process.env;
  const child = spawn(command, args, { cwd: ROOT, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const admin = (env: Record<string, string>, ...args: string[]) => run(process.execPath, [...WASM_FLAGS, CLI, ...args], env);

function getJson(url: string, key: string, ca: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    https
      .get(url, { ca, headers: { authorization: `Bearer ${key}` } }, (res) => {
        let text = '';
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      })
      .on('error', reject);
  });
}

/** A fresh database: PGlite from the suite's migrated template, or a schema of DATABASE_URL's PostgreSQL. */
async function freshEnv(extra: Record<string, string> = {}) {
  const dataDir = await mkdtemp(join(tmpdir(), 'hopper-admin-'));
  const env = testConfigEnv(dataDir, extra);
  const config = loadConfig(env);
  if (!config.databaseUrl) await seedPgliteDataDir(dataDir);
  const cleanUp = async () => {
    if (config.databaseUrl) {
      const database = await openDatabase(config);
      await sql`DROP SCHEMA IF EXISTS ${sql.id(config.databaseSchema)} CASCADE`.execute(database.db);
      await sql`DROP SCHEMA IF EXISTS ${sql.id(`${config.databaseSchema}_pgboss`)} CASCADE`.execute(database.db);
      await database.close();
    }
    await rm(dataDir, { recursive: true, force: true });
  };
  return { dataDir, env, config, cleanUp };
}

test('create-key and set-password let the operator in, on an empty database and beside a running Hopper', async (t) => {
  const port = await freePort();
  const { dataDir, env, config, cleanUp } = await freshEnv({
    PORT: String(port),
    PUBLIC_URL: `https://localhost:${port}`,
    LOG_LEVEL: 'warn',
  });
  t.after(cleanUp);

  // The documented command, through npm: the key alone on stdout.
  const made = await run('npm', ['run', '--silent', 'admin', '--', 'create-key', 'admin@localhost'], env);
  assert.equal(made.code, 0, made.stderr);
  assert.match(made.stdout, /^hop_[0-9A-Za-z]{46}\n$/);
  assert.match(made.stderr, /No user had admin@localhost: made user \d+, an Administrator/);
  const key = made.stdout.trim();

  const password = await admin(env, 'set-password', 'ADMIN@localhost');
  assert.equal(password.code, 0, password.stderr);
  assert.match(password.stdout, /^\w{20}\n$/);

  const listed = await admin(env, 'list');
  assert.match(listed.stdout, /^\d+\tadmin@localhost\t1 live API key\tpassword set\n$/);
  assert.equal((await admin(env, 'create-key')).code, 2, 'a usage error');
  const generated = await admin(env, 'generate-key');
  assert.ok(parseApiKey(generated.stdout.trim()), `a well-formed key: ${generated.stdout}`);

  // A start on this database creates no one and shows nothing: the key made above is the way in.
  const hopper = startHopper(env);
  t.after(() => stopHopper(hopper));
  // The certificate as the server uses it: read again until whole (it is written while the server starts).
  const certificate = async () => {
    const pem = await readFile(join(dataDir, 'tls', 'cert.pem'), 'utf8');
    if (!pem.includes('END CERTIFICATE')) throw new Error('not written yet');
    return pem;
  };
  const users = await waitFor('Hopper to answer', async () => getJson(`https://localhost:${port}/v3/users`, key, await certificate()), {
    timeoutMs: 60_000,
  });
  const ca = await certificate();
  assert.equal(users.status, 200);
  assert.deepEqual(
    (users.body as { data: { email: string }[] }).data.map((u) => u.email),
    ['admin@localhost'],
  );
  assert.doesNotMatch(hopper.output(), /hop_/, 'no first-start banner');

  const beside = await admin(env, 'create-key', 'admin@localhost', '--name', 'second');
  if (usingPostgres) {
    // PostgreSQL takes many processes: the key works at once on the running service.
    assert.equal(beside.code, 0, beside.stderr);
    assert.equal((await getJson(`https://localhost:${port}/v3/users`, beside.stdout.trim(), ca)).status, 200);
  } else {
    assert.equal(beside.code, 2);
    assert.match(beside.stderr, /is in use by process \d+/);
    assert.match(beside.stderr, /Stop Hopper first/);
  }
  assert.equal(await stopHopper(hopper), 0);

  const database = await openDatabase(config);
  try {
    const user = await findSignInUser(database.db, 'admin@localhost');
    assert.ok(await verifyPassword(password.stdout.trim(), user?.password_hash), 'the printed password signs in');
  } finally {
    await database.close();
  }
});

test('create-key refuses a user who is not an active Administrator', async (t) => {
  const { env, config, cleanUp } = await freshEnv();
  t.after(cleanUp);
  const database = await openDatabase(config);
  try {
    const now = new Date();
    await database.db
      .insertInto('users')
      .values({ first_name: 'U', last_name: 'Ser', email: 'user@example.com', roles: ['User'], created_at: now, updated_at: now })
      .execute();
  } finally {
    await database.close();
  }
  const refused = await admin(env, 'create-key', 'user@example.com');
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /user@example\.com \(user \d+\) is not an active Administrator \(Active, User\)/);
  assert.equal(refused.stdout, '', 'no key');
});
