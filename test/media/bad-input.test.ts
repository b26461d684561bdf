import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { asKey, filesUnder, postForm, upload, wavFile } from './fixtures.ts';

describe('media: bad input is a 4xx, never a 500', () => {
  let t: TestApp;
  let user: Awaited<ReturnType<typeof createUser>>;
  let url: string;
  before(async () => {
    t = await startTestApp();
    user = await createUser(t, 'User');
    url = `/v3/users/${user.id}/media`;
  });
  after(() => t.close());

  const file = { name: 'file', filename: 'ok.wav', content: wavFile(0.2) };

  test('JSON bodies: wrong types, missing and unknown fields are named', async () => {
    const api = asKey(t.app, user.key);
    const wrong = await api.post(url, { full_url: 5, name: [], collection_name: true, bogus: 1 });
    assertProblem(wrong, 400, 'validation');
    assert.deepEqual(Object.keys(wrong.body.errors).sort(), ['bogus', 'collection_name', 'full_url', 'name']);
    const missing = await api.post(url, { name: 'x' });
    assertProblem(missing, 400, 'validation');
    assert.deepEqual(missing.body.errors.full_url, ['is required']);
    assertProblem(await api.post(url, { full_url: 'https://example.com/a.mp3', name: 'n'.repeat(256) }), 400, 'validation');
    assertProblem(await api.post(url, { full_url: `https://example.com/${'a'.repeat(3000)}` }), 400, 'validation');
    const collection = await api.post(url, { full_url: 'https://example.com/a.mp3', collection_name: 'Audio Files' });
    assertProblem(collection, 400, 'validation');
    assert.match(collection.body.errors.collection_name[0], /lower-case/);
    assertProblem(await api.post(url, [1, 2]), 400, 'bad_request');
    assertProblem(await api.post(url, '"just a string"', { 'content-type': 'application/json' }), 400);
    assertProblem(await api.post(url, '{"full_url": ', { 'content-type': 'application/json' }), 400, 'bad_request');
    // No body at all: the body itself is wrong, not a field of it.
    const empty = await api.post(url, '', { 'content-type': 'application/json' });
    assertProblem(empty, 400, 'bad_request');
    assert.match(empty.body.detail, /JSON object/);
    assertProblem(await api.send('POST', url), 400, 'validation');
  });

  test('other content types are 415, on this route too', async () => {
    const api = asKey(t.app, user.key);
    assertProblem(await api.post(url, 'x', { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
    assertProblem(await api.post(url, 'a=b', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type');
    assertProblem(await api.post(url, wavFile(0.1).toString('latin1'), { 'content-type': 'audio/wav' }), 415, 'unsupported_media_type');
  });

  test('the multipart parser exists for media only: other routes still answer 415 to a form', async () => {
    const reply = await postForm(t.app, t.adminKey, '/v3/teams', [{ name: 'name', value: 'Form team' }]);
    assertProblem(reply, 415, 'unsupported_media_type');
  });

  test('a truncated WAV (60 bytes of a longer one) is refused as audio; a whole tiny one is kept', async () => {
    const truncated = await postForm(t.app, user.key, url, [{ name: 'file', filename: 'cut.wav', content: wavFile(1).subarray(0, 60) }]);
    assertProblem(truncated, 400, 'validation');
    assert.match(truncated.body.errors.file[0], /audio/);
    const headerOnly = await postForm(t.app, user.key, url, [{ name: 'file', filename: 'empty.wav', content: wavFile(0) }]);
    assertProblem(headerOnly, 400, 'validation');
    const tiny = await postForm(t.app, user.key, url, [{ name: 'file', filename: 'tiny.wav', content: wavFile(0.001) }]);
    assert.equal(tiny.status, 201, tiny.raw);
  });

  test('forms: missing file, file as text, unknown fields, two files, huge or bad names', async () => {
    const missing = await postForm(t.app, user.key, url, [{ name: 'name', value: 'x' }]);
    assertProblem(missing, 400, 'validation');
    assert.deepEqual(missing.body.errors, { file: ['is required'] });

    const asText = await postForm(t.app, user.key, url, [{ name: 'file', value: 'hello' }]);
    assertProblem(asText, 400, 'validation');
    assert.match(asText.body.errors.file[0], /file upload/);

    const unknown = await postForm(t.app, user.key, url, [file, { name: 'colour', value: 'red' }, { ...file, name: 'audio' }]);
    assertProblem(unknown, 400, 'validation');
    assert.deepEqual(Object.keys(unknown.body.errors).sort(), ['audio', 'colour']);

    const two = await postForm(t.app, user.key, url, [file, file]);
    assertProblem(two, 400, 'validation');
    assert.deepEqual(two.body.errors, { file: ['must be a single file'] });
    const three = await postForm(t.app, user.key, url, [file, file, file]);
    assertProblem(three, 400, 'validation');
    assert.deepEqual(three.body.errors, { file: ['must be a single file'] });

    const longName = await postForm(t.app, user.key, url, [file, { name: 'name', value: 'n'.repeat(256) }]);
    assertProblem(longName, 400, 'validation');
    assert.deepEqual(longName.body.errors, { name: ['must be at most 255 characters'] });
    const hugeName = await postForm(t.app, user.key, url, [{ name: 'name', value: 'n'.repeat(100_000) }, file]);
    assertProblem(hugeName, 400, 'validation');
    assert.ok(hugeName.body.errors.name);
    const nul = await postForm(t.app, user.key, url, [file, { name: 'name', value: 'a\u0000b' }]);
    assertProblem(nul, 400, 'validation');
    const twice = await postForm(t.app, user.key, url, [file, { name: 'name', value: 'a' }, { name: 'name', value: 'b' }]);
    assertProblem(twice, 400, 'validation');
    const empty = await postForm(t.app, user.key, url, [file, { name: 'name', value: '' }]);
    assertProblem(empty, 400, 'validation');
    const collection = await postForm(t.app, user.key, url, [file, { name: 'collection_name', value: '../etc' }]);
    assertProblem(collection, 400, 'validation');
    const emptyFile = await postForm(t.app, user.key, url, [{ name: 'file', filename: 'empty.wav', content: Buffer.alloc(0) }]);
    assertProblem(emptyFile, 400, 'validation');
    assert.ok(emptyFile.body.errors.file);

    assert.deepEqual(await filesUnder(join(t.dataDir, 'media-incoming')), [], 'refused uploads leave no staging files');
  });

  test('broken multipart bodies are 400s', async () => {
    const send = (contentType: string, payload: string) =>
      t.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${user.key}`, 'content-type': contentType }, payload });
    const bodies: [string, string][] = [
      ['multipart/form-data', 'no boundary at all'],
      ['multipart/form-data; boundary=xyz', 'garbage without any boundary'],
      ['multipart/form-data; boundary=xyz', '--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF'],
      ['multipart/form-data; boundary=xyz', ''],
    ];
    for (const [contentType, payload] of bodies) {
      const reply = await send(contentType, payload);
      assert.ok(reply.statusCode >= 400 && reply.statusCode < 500, `${reply.statusCode} for ${JSON.stringify(payload)}: ${reply.body}`);
      assert.match(String(reply.headers['content-type']), /problem\+json/);
    }
  });

  test('bad ids in paths are 400s or 404s', async () => {
    const api = asKey(t.app, user.key);
    for (const path of ['/v3/media/abc', '/v3/media/0', '/v3/media/-1', '/v3/media/1.5', '/v3/media/99999999999999999999']) {
      assertProblem(await api.get(path), 400, 'validation');
    }
    assertProblem(await api.get('/v3/users/abc/media'), 400, 'validation');
    assertProblem(await api.get('/v3/media/abc/download'), 400, 'validation');
    assertProblem(await api.delete('/v3/media/abc'), 400, 'validation');
    assertProblem(await api.send('PUT', '/v3/media/1', {}), 405, 'method_not_allowed');
  });

  test('client file names never reach the disk or the URL unsanitised', async () => {
    const media = await upload(t.app, user.key, user.id, '../../etc/pass wd<script>.wav', wavFile(0.2));
    assert.match(media.file_name, /^[A-Za-z0-9._-]+$/);
    assert.equal(media.file_name, 'pass-wd-script.wav');
    const odd = await upload(t.app, user.key, user.id, 'привет.wav', wavFile(0.2));
    assert.equal(odd.file_name, 'media.wav');
    assert.equal(odd.name, 'привет');
  });
});
