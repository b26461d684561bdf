import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { filesUnder, multipartBody, postForm, storedFiles, upload, wavFile } from './fixtures.ts';

const LIMIT = 16 * 1024;

describe('media size limit (MEDIA_MAX_BYTES)', () => {
  let t: TestApp;
  let user: Awaited<ReturnType<typeof createUser>>;
  before(async () => {
    t = await startTestApp({ env: { MEDIA_MAX_BYTES: String(LIMIT) } });
    user = await createUser(t, 'User');
  });
  after(() => t.close());

  const nothingOnDisk = async () => {
    assert.deepEqual(await storedFiles(t), [], 'nothing stored');
    assert.deepEqual(await filesUnder(join(t.dataDir, 'media-incoming')), [], 'nothing left in staging');
  };

  test('a file of exactly the limit is accepted; one byte more is 413 and leaves nothing on disk', async () => {
    const fitting = Buffer.from(wavFile(2).subarray(0, LIMIT));
    fitting.writeUInt32LE(LIMIT - 44, 40);
    const media = await upload(t.app, user.key, user.id, 'fits.wav', fitting);
    assert.equal(media.size, LIMIT);
    await t.app.inject({ method: 'DELETE', url: `/v3/media/${media.id}`, headers: { authorization: `Bearer ${user.key}` } });

    const tooBig = await postForm(t.app, user.key, `/v3/users/${user.id}/media`, [
      { name: 'file', filename: 'big.wav', content: wavFile(2).subarray(0, LIMIT + 1) },
    ]);
    assertProblem(tooBig, 413, 'payload_too_large');
    assert.match(tooBig.body.detail, new RegExp(`${LIMIT} bytes`));
    await nothingOnDisk();
  });

  test('a body far over the limit is refused from its Content-Length before it is read', async () => {
    const { body, contentType } = multipartBody([{ name: 'file', filename: 'huge.wav', content: Buffer.alloc(LIMIT * 8) }]);
    const reply = await t.app.inject({
      method: 'POST',
      url: `/v3/users/${user.id}/media`,
      headers: { authorization: `Bearer ${user.key}`, 'content-type': contentType },
      payload: body,
    });
    assert.equal(reply.statusCode, 413);
    await nothingOnDisk();
  });

  test('MEDIA_MAX_BYTES defaults to 20 MiB and is validated', () => {
    const base = { DATA_DIR: t.dataDir };
    assert.equal(loadConfig(base).mediaMaxBytes, 20 * 1024 * 1024);
    assert.equal(loadConfig(base).mediaDir, join(t.dataDir, 'media'));
    assert.equal(loadConfig(base).mediaFetchAllowPrivate, false);
    assert.equal(loadConfig(base).mediaFetchTimeoutMs, 30_000);
    assert.throws(() => loadConfig({ ...base, MEDIA_MAX_BYTES: '20MB' }), /MEDIA_MAX_BYTES must be an integer/);
    assert.throws(() => loadConfig({ ...base, MEDIA_MAX_BYTES: '0' }), /MEDIA_MAX_BYTES/);
    assert.throws(() => loadConfig({ ...base, MEDIA_FETCH_TIMEOUT: 'soon' }), /MEDIA_FETCH_TIMEOUT/);
    assert.throws(() => loadConfig({ ...base, MEDIA_FETCH_ALLOW_PRIVATE: 'maybe' }), /MEDIA_FETCH_ALLOW_PRIVATE must be true or false/);
  });
});
