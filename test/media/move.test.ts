import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { moveMedia } from '../../src/media/move.ts';
import { openStore } from '../../src/media/storage.ts';
import type { MediaStorage } from '../../src/media/store.ts';
import { WASM_FLAGS } from '../sending/support/hopper-process.ts';
import { createUser } from '../support/factories.ts';
import { startTestApp, type TestApp, usingPostgres } from '../support/test-app.ts';
import { asKey, fetchBytes, filesUnder, storedFiles, upload, wavFile } from './fixtures.ts';

const run = promisify(execFile);
const CLI = join(import.meta.dirname, '..', '..', 'src', 'media', 'move-cli.ts');

describe('moving media between stores (npm run media:move) and the disk fallback', () => {
  let t: TestApp;
  let disk: MediaStorage;
  let database: MediaStorage;
  let user: Awaited<ReturnType<typeof createUser>>;
  const files = [wavFile(1), wavFile(2), wavFile(3)];
  const media: { id: number; full_url: string }[] = [];
  const warnings: string[] = [];
  const options = (deleteSource: boolean) => ({ deleteSource, warn: (m: string) => warnings.push(m) });

  before(async () => {
    t = await startTestApp({ env: { MEDIA_STORE: 'postgres' } });
    disk = await openStore('disk', t.config, t.database.db);
    database = await openStore('postgres', t.config, t.database.db);
    user = await createUser(t, 'User');
    for (const [i, file] of files.entries()) media.push(await upload(t.app, user.key, user.id, `f${i}.wav`, file));
    // A deleted item is not moved: its file went with it.
    assert.equal((await asKey(t.app, user.key).delete(`/v3/media/${media[2]?.id}`)).status, 200);
  });
  after(() => t.close());

  const servesAll = async () => {
    for (const [i, item] of media.slice(0, 2).entries()) {
      const reply = await fetchBytes(t.app, item.full_url, { range: 'bytes=40-99' });
      assert.equal(reply.status, 206);
      assert.ok(reply.bytes.equals((files[i] as Buffer).subarray(40, 100)), `media ${item.id}`);
    }
  };

  test('database → disk: the files are copied and checked; the app still serves them from the disk', async () => {
    assert.equal((await storedFiles(t)).length, 2);
    const counts = await moveMedia(t.database.db, database, disk, options(true));
    assert.deepEqual(counts, { copied: 2, already: 0, missing: 0, deleted: 2 });
    assert.deepEqual(await storedFiles(t), [], 'removed from the database');
    assert.equal((await filesUnder(t.config.mediaDir)).length, 2);
    // MEDIA_STORE is still postgres: a key it lacks is looked for in MEDIA_DIR.
    await servesAll();
  });

  test('disk → database, run twice: the second run finds everything there; a missing file is named', async () => {
    const first = await moveMedia(t.database.db, disk, database, options(false));
    assert.deepEqual(first, { copied: 2, already: 0, missing: 0, deleted: 0 });
    const again = await moveMedia(t.database.db, disk, database, options(true));
    assert.deepEqual(again, { copied: 0, already: 2, missing: 0, deleted: 2 });
    assert.deepEqual(await filesUnder(t.config.mediaDir), []);
    await servesAll();
    // A live item whose file is nowhere: counted and named, the rest still moves.
    await sql`DELETE FROM media_blobs WHERE storage_key = (SELECT storage_key FROM media WHERE id = ${media[0]?.id})`.execute(
      t.database.db,
    );
    const missing = await moveMedia(t.database.db, database, disk, options(false));
    assert.deepEqual(missing, { copied: 1, already: 0, missing: 1, deleted: 0 });
    assert.match(warnings.join('\n'), new RegExp(`media ${media[0]?.id}: no file under`));
  });

  test('the command: moves with the configuration of the environment, refuses a move onto the same store', async (t2) => {
    if (!usingPostgres) return t2.skip('PGlite allows one process: the command is run on PostgreSQL');
    const env = {
      ...process.env,
      DATA_DIR: t.dataDir,
      DATABASE_URL: t.config.databaseUrl,
      DATABASE_SCHEMA: t.config.databaseSchema,
      MEDIA_STORE: 'postgres',
      LOG_LEVEL: 'silent',
    };
    // media[1] now only on the disk, media[0] nowhere (the test above).
    const second = await t.database.db
      .selectFrom('media')
      .select('storage_key')
      .where('id', '=', media[1]?.id as number)
      .executeTakeFirstOrThrow();
    await database.delete(second.storage_key);
    const moved = await run(process.execPath, [...WASM_FLAGS, CLI, '--from', 'disk'], { env });
    assert.match(moved.stdout, /Media disk → postgres: 1 copied, 0 already there, 1 missing in disk/);
    const same = await run(process.execPath, [...WASM_FLAGS, CLI, '--from', 'postgres'], { env }).catch((error) => error);
    assert.equal(same.code, 2);
    assert.match(same.stderr, /the two must differ/);
    assert.deepEqual(await database.stat(second.storage_key), { size: (files[1] as Buffer).length });
  });
});
