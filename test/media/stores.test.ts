import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { openStore } from '../../src/media/storage.ts';
import type { MediaStorage } from '../../src/media/store.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { type LocalS3, startLocalS3 } from './s3-server.ts';

const readAll = async (stream: Readable) => {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};

/** A stream of `bytes` in uneven chunks, as a socket or a file delivers them. */
const unevenly = (bytes: Buffer) => {
  const chunks: Buffer[] = [];
  for (let at = 0, n = 1; at < bytes.length; n = (n * 7919) % 100_003) {
    chunks.push(bytes.subarray(at, at + n));
    at += n;
  }
  return Readable.from(chunks);
};

describe('media stores: the same contract on the disk, in the database and in an S3-compatible bucket', () => {
  let t: TestApp;
  let s3: LocalS3;
  const stores: Record<string, MediaStorage> = {};
  before(async () => {
    t = await startTestApp();
    s3 = await startLocalS3();
    const s3Config = loadConfig({ DATA_DIR: t.dataDir, ...s3.env });
    stores.disk = await openStore('disk', t.config, t.database.db);
    stores.postgres = await openStore('postgres', t.config, t.database.db);
    stores.s3 = await openStore('s3', s3Config, t.database.db);
  });
  after(async () => {
    await t.close();
    await s3.close();
  });

  // 1 MiB + 3 bytes: more than four of the database's 256 KiB parts, the last one short.
  const file = randomBytes(1024 * 1024 + 3);
  for (const kind of ['disk', 'postgres', 's3']) {
    test(`${kind}: put, whole and ranged reads, stat, replace, delete`, async () => {
      const store = stores[kind] as MediaStorage;
      const key = `7/${randomBytes(24).toString('base64url')}`;
      assert.equal(await store.stat(key), undefined);
      await assert.rejects(store.createReadStream(key), { code: 'ENOENT' });
      // S3 is given the size (as the intake does); the others read to the end.
      assert.deepEqual(await store.put(key, unevenly(file), kind === 's3' ? file.length : undefined), { size: file.length });
      assert.deepEqual(await store.stat(key), { size: file.length });
      assert.ok((await readAll(await store.createReadStream(key))).equals(file));
      const part = 256 * 1024;
      for (const [start, end] of [
        // s3rver reads `bytes=0-0` as the whole file (its `end || Infinity`); S3 itself does not.
        ...(kind === 's3' ? [] : [[0, 0] as const]),
        [100, 199],
        [part - 1, part], // across a part boundary
        [part, 2 * part - 1], // exactly one part
        [3, 4 * part + 2], // several parts, both ends inside one
        [file.length - 3, file.length - 1], // the short last part
      ] as const) {
        const bytes = await readAll(await store.createReadStream(key, { start, end }));
        assert.ok(bytes.equals(file.subarray(start, end + 1)), `${kind} bytes ${start}-${end}`);
      }
      const smaller = randomBytes(10);
      await store.put(key, Readable.from([smaller]));
      assert.deepEqual(await store.stat(key), { size: 10 });
      assert.ok((await readAll(await store.createReadStream(key))).equals(smaller), 'a second put replaces the whole file');
      await store.delete(key);
      assert.equal(await store.stat(key), undefined);
      await assert.rejects(store.createReadStream(key), { code: 'ENOENT' });
      await store.delete(key); // deleting what is not there is not an error
    });

    test(`${kind}: a put whose source fails stores nothing`, async () => {
      const store = stores[kind] as MediaStorage;
      const key = `7/${randomBytes(24).toString('base64url')}`;
      async function* failing() {
        yield randomBytes(300 * 1024);
        throw new Error('the client went away');
      }
      await assert.rejects(store.put(key, Readable.from(failing()), kind === 's3' ? 600 * 1024 : undefined), /the client went away/);
      // S3 keeps no object of a PUT that never completed; s3rver keeps an empty one, so there the
      // rejection (the upload was ended, not left waiting) is what this shows.
      if (kind !== 's3') assert.equal(await store.stat(key), undefined);
    });
  }

  test('MEDIA_STORE: disk on PGlite, postgres with DATABASE_URL, s3 needs a bucket, unknown kinds refused', () => {
    const base = { DATA_DIR: t.dataDir };
    assert.equal(loadConfig(base).mediaStore, 'disk');
    assert.equal(loadConfig({ ...base, DATABASE_URL: 'postgres://db.example/hopper' }).mediaStore, 'postgres');
    assert.equal(loadConfig({ ...base, DATABASE_URL: 'postgres://db.example/hopper', MEDIA_STORE: 'disk' }).mediaStore, 'disk');
    assert.equal(loadConfig({ ...base, MEDIA_STORE: 'postgres' }).mediaStore, 'postgres');
    assert.throws(() => loadConfig({ ...base, MEDIA_STORE: 's3' }), /MEDIA_STORE=s3 needs MEDIA_S3_BUCKET/);
    assert.throws(() => loadConfig({ ...base, MEDIA_STORE: 'nfs' }), /MEDIA_STORE must be one of disk, postgres, s3/);
    assert.throws(() => loadConfig({ ...base, ...s3.env, MEDIA_S3_ENDPOINT: 'ftp://x' }), /MEDIA_S3_ENDPOINT must be an http/);
    assert.throws(() => loadConfig({ ...base, ...s3.env, MEDIA_S3_PREFIX: 'a b' }), /MEDIA_S3_PREFIX/);
    const s3Config = loadConfig({ ...base, ...s3.env, MEDIA_S3_PREFIX: 'hopper/' }).mediaS3;
    assert.deepEqual(s3Config, {
      bucket: 'hopper-media',
      prefix: 'hopper/',
      region: 'us-east-1',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    });
    assert.throws(
      () => loadConfig({ ...base, ...s3.env, AWS_SECRET_ACCESS_KEY: '' }),
      /AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together/,
    );
  });
});
