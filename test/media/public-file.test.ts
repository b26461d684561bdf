import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { asKey, fetchBytes, storedFiles, upload, wavFile } from './fixtures.ts';

describe('media files: public URL, ranges, keyed download, delete', () => {
  let t: TestApp;
  let user: Awaited<ReturnType<typeof createUser>>;
  const wav = wavFile(3);
  let media: any;
  before(async () => {
    t = await startTestApp();
    user = await createUser(t, 'User');
    media = await upload(t.app, user.key, user.id, 'range.wav', wav);
  });
  after(() => t.close());

  test('a single range is a 206 with Content-Range and exactly that slice', async () => {
    const middle = await fetchBytes(t.app, media.full_url, { range: 'bytes=100-199' });
    assert.equal(middle.status, 206);
    assert.equal(middle.headers['content-range'], `bytes 100-199/${wav.length}`);
    assert.equal(middle.headers['content-length'], '100');
    assert.equal(middle.headers['content-type'], 'audio/wav');
    assert.ok(middle.bytes.equals(wav.subarray(100, 200)));

    const open = await fetchBytes(t.app, media.full_url, { range: `bytes=${wav.length - 10}-` });
    assert.equal(open.status, 206);
    assert.ok(open.bytes.equals(wav.subarray(wav.length - 10)));

    const suffix = await fetchBytes(t.app, media.full_url, { range: 'bytes=-44' });
    assert.equal(suffix.status, 206);
    assert.equal(suffix.headers['content-range'], `bytes ${wav.length - 44}-${wav.length - 1}/${wav.length}`);
    assert.ok(suffix.bytes.equals(wav.subarray(wav.length - 44)));

    const pastEnd = await fetchBytes(t.app, media.full_url, { range: `bytes=10-${wav.length * 2}` });
    assert.equal(pastEnd.status, 206, 'an end past the file is clamped');
    assert.ok(pastEnd.bytes.equals(wav.subarray(10)));
  });

  test('a range outside the file is 416 with Content-Range: bytes */size', async () => {
    for (const range of [`bytes=${wav.length}-`, `bytes=${wav.length + 5}-${wav.length + 9}`, 'bytes=-0']) {
      const reply = await asKey(t.app, undefined).get(new URL(media.full_url).pathname, { range });
      assertProblem(reply, 416, 'range_not_satisfiable');
      assert.equal(reply.headers['content-range'], `bytes */${wav.length}`);
    }
  });

  test('malformed, multiple or conditional ranges are ignored: the whole file is sent', async () => {
    const variants: Record<string, string>[] = [
      { range: 'bytes=abc' },
      { range: 'bytes=20-10' },
      { range: 'bytes=0-1,5-6' },
      { range: 'items=0-1' },
      { range: 'bytes=0-9', 'if-range': '"some-etag"' },
    ];
    for (const headers of variants) {
      const reply = await fetchBytes(t.app, media.full_url, headers);
      assert.equal(reply.status, 200, JSON.stringify(headers));
      assert.ok(reply.bytes.equals(wav));
    }
  });

  test('HEAD gives the headers and no body', async () => {
    const head = await t.app.inject({ method: 'HEAD', url: new URL(media.full_url).pathname });
    assert.equal(head.statusCode, 200);
    assert.equal(head.headers['content-length'], String(wav.length));
    assert.equal(head.headers['content-type'], 'audio/wav');
    assert.equal(head.headers['accept-ranges'], 'bytes');
    assert.equal(head.rawPayload.length, 0);
    const ranged = await t.app.inject({ method: 'HEAD', url: new URL(media.full_url).pathname, headers: { range: 'bytes=0-9' } });
    assert.equal(ranged.statusCode, 206);
    assert.equal(ranged.headers['content-length'], '10');
  });

  test('the public URL needs the exact token and file name', async () => {
    const path = new URL(media.full_url).pathname;
    const [, , token] = path.split('/');
    const anon = asKey(t.app, undefined);
    assertProblem(await anon.get(`/media/${token}/other.wav`), 404, 'not_found');
    assertProblem(await anon.get(`/media/${'A'.repeat(32)}/range.wav`), 404, 'not_found');
    assertProblem(await anon.get('/media/short/range.wav'), 404, 'not_found');
    assertProblem(await anon.get(`/media/${token}x/range.wav`), 404, 'not_found');
    assertProblem(await anon.get(`/media/${token}`), 404, 'not_found');
  });

  test('download_url needs a key and sends an attachment', async () => {
    const path = new URL(media.download_url).pathname;
    assertProblem(await asKey(t.app, undefined).get(path), 401, 'unauthorized');
    const other = await createUser(t, 'User');
    assertProblem(await asKey(t.app, other.key).get(path), 403, 'forbidden');
    const reply = await fetchBytes(t.app, media.download_url, {}, user.key);
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['content-disposition'], 'attachment; filename="range.wav"');
    assert.equal(reply.headers['content-type'], 'audio/wav');
    assert.ok(reply.bytes.equals(wav));
    const ranged = await fetchBytes(t.app, media.download_url, { range: 'bytes=0-3' }, user.key);
    assert.equal(ranged.status, 206);
    assert.equal(ranged.bytes.toString('latin1'), 'RIFF');
  });

  test('delete: 200 success, then the item, its download and its public URL are 404 and the bytes are gone', async () => {
    const doomed = await upload(t.app, user.key, user.id, 'doomed.wav', wavFile(1));
    const filesBefore = await storedFiles(t);
    const api = asKey(t.app, user.key);
    const deleted = await api.delete(`/v3/media/${doomed.id}`);
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.body, { success: true });
    assertProblem(await api.get(`/v3/media/${doomed.id}`), 404, 'not_found');
    assertProblem(await api.delete(`/v3/media/${doomed.id}`), 404, 'not_found');
    assertProblem(await api.get(`/v3/media/${doomed.id}/download`), 404, 'not_found');
    assertProblem(await asKey(t.app, undefined).get(new URL(doomed.full_url).pathname), 404, 'not_found');
    const search = await api.get(`/v3/users/${user.id}/media?id=${doomed.id}`);
    assert.equal(search.body.meta.total, 0, 'deleted rows never appear in a search');
    assert.equal((await storedFiles(t)).length, filesBefore.length - 1);

    const row = await t.database.db.selectFrom('media').selectAll().where('id', '=', doomed.id).executeTakeFirstOrThrow();
    assert.ok(row.deleted_at instanceof Date, 'the row stays, soft-deleted, for drops that used it');
    // The file of the first item is untouched.
    assert.equal((await fetchBytes(t.app, media.full_url)).status, 200);
  });
});
