import { createHash } from 'node:crypto';
import { appendFileSync, cpSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { openJobQueue } from '../../src/db/job-queue.ts';
import { bootstrapTemplateAdmin, type TemplateAdmin } from './template-admin.ts';

/**
 * A migrated PGlite data directory that test databases start from.
 *
 * A fresh PGlite directory runs PostgreSQL's initdb in WebAssembly, which costs several seconds of
 * CPU, and every test file starts at least one app. Copying a directory that is already
 * initialised and migrated takes milliseconds, and reopening it about half a second. The first
 * test process to need it builds the template (the real `openDatabase` and `openJobQueue` on an
 * empty directory, so migrations still run for real) and renames it into place; later ones copy
 * it. The template is named by a hash of everything that shapes it, so a changed migration or a
 * new PGlite or pg-boss version builds a new one.
 *
 * There are two: the migrated database, which a Hopper process started by a test bootstraps as a
 * first start does, and (`-admin`) the same with its first-start Administrator already made, for
 * the test apps of test-app.ts — each of which would otherwise spend about 160 ms of CPU on it,
 * most of it the scrypt hash of the Administrator's password (./template-admin.ts).
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const cacheDir = join(tmpdir(), 'hopper-pglite-templates');

export async function templateKey(): Promise<string> {
  const hash = createHash('sha256');
  const migrations = join(root, 'src/db/migrations');
  const files = [
    ...(await readdir(migrations)).sort().map((f) => join(migrations, f)),
    ...['src/db/migrate.ts', 'src/db/database.ts', 'src/db/job-queue.ts', 'test/support/template-admin.ts'].map((f) => join(root, f)),
    ...['bootstrap.ts', 'users.ts', 'api-keys.ts', 'passwords.ts'].map((f) => join(root, 'src/identity', f)),
    ...['@electric-sql/pglite', 'pg-boss'].map((p) => join(root, 'node_modules', p, 'package.json')),
  ];
  for (const file of files) hash.update(file).update(await readFile(file));
  return hash.digest('hex').slice(0, 16);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function buildTemplate(target: string, withAdmin: boolean): Promise<void> {
  await mkdir(cacheDir, { recursive: true });
  const dataDir = await mkdtemp(join(cacheDir, 'building-'));
  try {
    const config = loadConfig({ DATA_DIR: dataDir, PUBLIC_URL: 'https://hopper.test', LOG_LEVEL: 'silent' });
    // The Administrator's template starts from a copy of the migrated one rather than from initdb.
    // A test app's database holds a few thousand rows: PostgreSQL starts in about 200 ms of CPU
    // with 16 MB of shared buffers where PGlite's default 128 MB takes 450 ms.
    if (withAdmin) {
      await seedPgliteDataDir(dataDir);
      appendFileSync(join(dataDir, 'pgdata', 'postgresql.auto.conf'), 'shared_buffers = 16MB\n');
    }
    const database = await openDatabase(config);
    const queue = await openJobQueue(database, config);
    // The first-start Administrator, whose key a test app is given (a file PostgreSQL ignores).
    if (withAdmin) writeFileSync(join(dataDir, 'pgdata', ADMIN_FILE), JSON.stringify(await bootstrapTemplateAdmin(database.db, config)));
    await queue.stop();
    await database.close();
    // Another test process may have built it meanwhile: then theirs stays, ours goes.
    await rename(join(dataDir, 'pgdata'), target).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
    });
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

let key: Promise<string> | undefined;

/**
 * Fills `DATA_DIR/pgdata` with a copy of the migrated template, building the template once; with
 * `admin`, the template whose first-start Administrator is made, and returns its key.
 */
export async function seedPgliteDataDir(dataDir: string, options: { admin: true }): Promise<TemplateAdmin>;
export async function seedPgliteDataDir(dataDir: string, options?: { admin?: false }): Promise<undefined>;
export async function seedPgliteDataDir(dataDir: string, options: { admin?: boolean } = {}): Promise<TemplateAdmin | undefined> {
  // Once a process: a lane of the test runner seeds many databases.
  key ??= templateKey();
  const template = join(cacheDir, `${await key}${options.admin ? '-admin' : ''}`);
  if (!(await exists(template))) await buildTemplate(template, options.admin === true);
  // cpSync copies in C++: about 45 ms of CPU for the template's 1,200 files, where the promise
  // API's cp, written in JavaScript, takes 300–400 ms.
  cpSync(template, join(dataDir, 'pgdata'), { recursive: true });
  return options.admin ? (JSON.parse(readFileSync(join(template, ADMIN_FILE), 'utf8')) as TemplateAdmin) : undefined;
}

const ADMIN_FILE = 'hopper-test-admin.json';

/**
 * A new DATA_DIR (in the temporary directory, named after `prefix`) whose PGlite database is the
 * migrated template, for a test that starts Hopper as a process of its own and does not judge
 * the very first start: Hopper opens it in about 4 s of CPU instead of the 9.5 s that PostgreSQL's
 * initdb and every migration take in WebAssembly. Hopper still bootstraps its Administrator there.
 */
export async function seededDataDir(prefix: string): Promise<string> {
  const dataDir = await mkdtemp(join(tmpdir(), prefix));
  await seedPgliteDataDir(dataDir);
  return dataDir;
}
