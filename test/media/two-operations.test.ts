import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { asKey, fetchBytes, postForm, wavFile } from './fixtures.ts';

/**
 * Media created by two operations with one request type each, so that client generators type
 * them exactly: `POST /users/{id}/media/upload` (multipart/form-data) and
 * `POST /users/{id}/media/import` (JSON with full_url). `POST /users/{id}/media`, which takes
 * either, stays for existing clients (marked deprecated in the document).
 */
describe('media: upload and import as two operations', () => {
  let t: TestApp;
  let remote: Server;
  let base: string;
  let user: Awaited<ReturnType<typeof createUser>>;
  let other: Awaited<ReturnType<typeof createUser>>;
  const wav = wavFile(6);
  before(async () => {
    remote = createServer((request, response) => {
      if (request.url === '/open-house.wav') response.writeHead(200, { 'content-length': wav.length }).end(wav);
      else response.writeHead(404).end('no');
    });
    remote.listen(0, '127.0.0.1');
    await once(remote, 'listening');
    base = `http://127.0.0.1:${(remote.address() as AddressInfo).port}`;
    t = await startTestApp({ env: { MEDIA_FETCH_ALLOW_PRIVATE: 'true' } });
    user = await createUser(t, 'User');
    other = await createUser(t, 'User');
  });
  after(async () => {
    await t.close();
    remote.close();
  });

  test('upload takes a form, and answers 201 with the media item and its Location', async () => {
    const reply = await postForm(t.app, user.key, `/v3/users/${user.id}/media/upload`, [
      { name: 'name', value: 'Open house' },
      { name: 'file', filename: 'open-house.wav', content: wav },
    ]);
    assert.equal(reply.status, 201, reply.raw);
    assert.equal(reply.body.name, 'Open house');
    assert.equal(reply.body.mime_type, 'audio/wav');
    assert.equal(reply.headers.location, `${t.config.publicUrl}/v3/media/${reply.body.id}`);
    const file = await fetchBytes(t.app, reply.body.full_url);
    assert.deepEqual(file.bytes, wav);
  });

  test('import fetches full_url, and answers 201 with the media item', async () => {
    const reply = await asKey(t.app, user.key).post(`/v3/users/${user.id}/media/import`, {
      full_url: `${base}/open-house.wav`,
      name: 'Imported',
    });
    assert.equal(reply.status, 201, reply.raw);
    assert.equal(reply.body.name, 'Imported');
    assert.equal(reply.body.file_name, 'open-house.wav');
    assert.equal(reply.body.size, wav.length);
    assert.equal(reply.headers.location, `${t.config.publicUrl}/v3/media/${reply.body.id}`);
  });

  test('each refuses the other request type with a 415 that names the right operation', async () => {
    const json = await asKey(t.app, user.key).post(`/v3/users/${user.id}/media/upload`, { full_url: `${base}/open-house.wav` });
    assertProblem(json, 415, 'unsupported_media_type');
    assert.match(json.body.detail, /multipart\/form-data/);
    assert.match(json.body.detail, /\/media\/import/);
    const empty = await asKey(t.app, user.key).send('POST', `/v3/users/${user.id}/media/upload`);
    assertProblem(empty, 415, 'unsupported_media_type');

    const form = await postForm(t.app, user.key, `/v3/users/${user.id}/media/import`, [
      { name: 'file', filename: 'open-house.wav', content: wav },
    ]);
    assertProblem(form, 415, 'unsupported_media_type');
    assert.match(form.body.detail, /full_url/);
    assert.match(form.body.detail, /\/media\/upload/);
  });

  test('bad input: wrong types, missing, unknown and huge fields, bad and foreign ids are 4xx', async () => {
    const api = asKey(t.app, user.key);
    const url = `/v3/users/${user.id}/media/import`;
    const wrong = await api.post(url, { full_url: 5, name: [], collection_name: true, bogus: 1 });
    assertProblem(wrong, 400, 'validation');
    assert.deepEqual(Object.keys(wrong.body.errors).sort(), ['bogus', 'collection_name', 'full_url', 'name']);
    const missing = await api.post(url, { name: 'x' });
    assertProblem(missing, 400, 'validation');
    assert.deepEqual(missing.body.errors.full_url, ['is required']);
    assertProblem(await api.post(url, { full_url: `https://example.com/${'a'.repeat(3000)}` }), 400, 'validation');
    assertProblem(await api.post(url, { full_url: `${base}/open-house.wav`, name: 'n'.repeat(100_000) }), 400, 'validation');
    assertProblem(await api.post(url, [1, 2]), 400, 'bad_request');
    assertProblem(await api.post(`/v3/users/abc/media/import`, { full_url: `${base}/open-house.wav` }), 400);
    assertProblem(await api.post(`/v3/users/99999999999999999999/media/import`, { full_url: `${base}/open-house.wav` }), 400);
    const foreign = await api.post(`/v3/users/${other.id}/media/import`, { full_url: `${base}/open-house.wav` });
    assert.ok(foreign.status === 403 || foreign.status === 404, `${foreign.status}`);

    const unknownPart = await postForm(t.app, user.key, `/v3/users/${user.id}/media/upload`, [
      { name: 'file', filename: 'a.wav', content: wav },
      { name: 'bogus', value: 'x' },
    ]);
    assertProblem(unknownPart, 400, 'validation');
    assert.deepEqual(Object.keys(unknownPart.body.errors), ['bogus']);
    const noFile = await postForm(t.app, user.key, `/v3/users/${user.id}/media/upload`, [{ name: 'name', value: 'x' }]);
    assertProblem(noFile, 400, 'validation');
    assert.deepEqual(noFile.body.errors.file, ['is required']);
    const foreignUpload = await postForm(t.app, user.key, `/v3/users/${other.id}/media/upload`, [
      { name: 'file', filename: 'a.wav', content: wav },
    ]);
    assert.ok(foreignUpload.status === 403 || foreignUpload.status === 404, `${foreignUpload.status}`);
  });

  test('the document gives each one request type; the old operation stays, deprecated', async () => {
    const doc = (await asKey(t.app, undefined).get('/v3/openapi.json')).body;
    const upload = doc.paths['/v3/users/{user_id}/media/upload'].post;
    const importing = doc.paths['/v3/users/{user_id}/media/import'].post;
    const old = doc.paths['/v3/users/{user_id}/media'].post;
    assert.equal(upload.operationId, 'uploadMedia');
    assert.deepEqual(Object.keys(upload.requestBody.content), ['multipart/form-data']);
    assert.equal(importing.operationId, 'importMedia');
    assert.deepEqual(Object.keys(importing.requestBody.content), ['application/json']);
    assert.equal(old.operationId, 'createMedia');
    assert.equal(old.deprecated, true);
    assert.deepEqual(Object.keys(old.requestBody.content).sort(), ['application/json', 'multipart/form-data']);
  });
});
