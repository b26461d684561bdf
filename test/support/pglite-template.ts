import { createHash } from 'node:crypto';
import { cp, mkdir, mkdtemp, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { openJobQueue } from '../../src/db/job-queue.ts';

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
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const cacheDir = join(tmpdir(), 'hopper-pglite-templates');

async function templateKey(): Promise<string> {
  const hash = createHash('sha256');
  const migrations = join(root, 'src/db/migrations');
  const files = [
    ...(await readdir(migrations)).sort().map((f) => join(migrations, f)),
    ...['src/db/migrate.ts', 'src/db/database.ts', 'src/db/job-queue.ts'].map((f) => join(root, f)),
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

async function buildTemplate(target: string): Promise<void> {
  await mkdir(cacheDir, { recursive: true });
  const dataDir = await mkdtemp(join(cacheDir, 'building-'));
  try {
    const config = loadConfig({ DATA_DIR: dataDir, PUBLIC_URL: 'https://hopper.test', LOG_LEVEL: 'silent' });
    const database = await openDatabase(config);
    const queue = await openJobQueue(database, config);
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

/** Fills `DATA_DIR/pgdata` with a copy of the migrated template, building the template once. */
export async function seedPgliteDataDir(dataDir: string): Promise<void> {
  const template = join(cacheDir, await templateKey());
  if (!(await exists(template))) await buildTemplate(template);
  await cp(template, join(dataDir, 'pgdata'), { recursive: true });
}
