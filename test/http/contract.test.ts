import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { assertProblem, TIMESTAMP } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

describe('HTTP contract', () => {
  let t: TestApp;
  let admin: ReturnType<typeof asKey>;
  before(async () => {
    t = await startTestApp();
    admin = asKey(t.app, t.adminKey);
  });
  after(() => t.close());

  test('GET /health answers without a key and names the database', async () => {
    const reply = await asKey(t.app, undefined).get('/health');
    assert.equal(reply.status, 200);
    assert.equal(reply.body.status, 'ok');
    assert.equal(reply.body.database, t.database.kind);
  });

  test('unknown paths are 404 problems; other API versions say v3 is the only one', async () => {
    assertProblem(await admin.get('/v3/nothing-here'), 404, 'not_found');
    assertProblem(await admin.get('/nothing'), 404, 'not_found');
    const v2 = await admin.get('/v2/users');
    assertProblem(v2, 404, 'not_found');
    assert.match(v2.body.detail, /v3 is the only supported version/);
  });

  test('a known path with a wrong method is 405 with Allow', async () => {
    const reply = await admin.send('PATCH', '/v3/users');
    assertProblem(reply, 405, 'method_not_allowed');
    assert.equal(reply.headers.allow, 'GET, HEAD, POST');
    const onItem = await admin.send('POST', '/v3/api_keys/1');
    assertProblem(onItem, 405);
    assert.equal(onItem.headers.allow, 'GET, HEAD, DELETE');
  });

  test('bodies: not JSON is 415, malformed JSON is 400, over 1 MiB is 413', async () => {
    assertProblem(
      await admin.post('/v3/teams', 'name=x', { 'content-type': 'application/x-www-form-urlencoded' }),
      415,
      'unsupported_media_type',
    );
    const text = await admin.post('/v3/teams', 'hello', { 'content-type': 'text/plain' });
    assertProblem(text, 415, 'unsupported_media_type');
    assert.equal(text.body.detail, "POST /v3/teams takes a body of application/json; the request's Content-Type is text/plain.");
    assertProblem(await admin.post('/v3/teams', '{"name": ', { 'content-type': 'application/json' }), 400, 'bad_request');
    const huge = JSON.stringify({ name: 'x'.repeat(10 * 1024 * 1024) });
    assertProblem(await admin.post('/v3/teams', huge, { 'content-type': 'application/json' }), 413, 'payload_too_large');
  });

  test('router-level errors are problems too: malformed URLs and over-long path parameters', async () => {
    assertProblem(await admin.get('/v3/users/%E0%A4%A'), 400, 'bad_request');
    assertProblem(await admin.get(`/v3/users/${'9'.repeat(500)}`), 400, 'bad_request');
  });

  test('validation problems name each field', async () => {
    const reply = await admin.post('/v3/users', { first_name: 5, email: 'not-an-email', bogus: true, id: 99 });
    assertProblem(reply, 400, 'validation');
    assert.deepEqual(Object.keys(reply.body.errors).sort(), ['bogus', 'email', 'first_name', 'last_name']);
    assert.deepEqual(reply.body.errors.first_name, ['must be a string']);
    assert.deepEqual(reply.body.errors.last_name, ['is required']);
    assert.deepEqual(reply.body.errors.bogus, ['is not a known field']);
    assert.equal(
      reply.body.message,
      '4 fields are invalid. The last_name field is required. The bogus field is not a known field. ' +
        'The first_name field must be a string. The email field must be a valid email address.',
    );
  });

  test('401 problems carry WWW-Authenticate', async () => {
    const none = await asKey(t.app, undefined).get('/v3/users');
    assertProblem(none, 401, 'unauthorized');
    assert.equal(none.headers['www-authenticate'], 'Bearer realm="hopper"');
    const basic = await asKey(t.app, undefined).get('/v3/users', { authorization: 'Basic YTpi' });
    assertProblem(basic, 401);
    assert.match(String(basic.headers['www-authenticate']), /error="invalid_token"/);
  });

  test('X-Request-Id is echoed when sane and generated otherwise', async () => {
    const echoed = await admin.get('/v3/users', { 'x-request-id': 'trace-123' });
    assert.equal(echoed.headers['x-request-id'], 'trace-123');
    const replaced = await admin.get('/v3/users', { 'x-request-id': 'bad id\twith <junk>' });
    assert.match(String(replaced.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    const onError = await admin.get('/v3/nowhere');
    assert.ok(onError.headers['x-request-id']);
  });

  test('timestamps are YYYY-MM-DDThh:mm:ssZ', async () => {
    const reply = await admin.get(`/v3/users/${t.adminId}`);
    assert.match(reply.body.created_at, TIMESTAMP);
    assert.match(reply.body.updated_at, TIMESTAMP);
    assert.equal(reply.body.deleted_at, null);
  });

  test('the OpenAPI document is generated from the routes and /docs renders it', async () => {
    const doc = await asKey(t.app, undefined).get('/v3/openapi.json');
    assert.equal(doc.status, 200);
    assert.equal(doc.body.openapi, '3.1.0');
    for (const path of ['/v3/users', '/v3/users/{id}', '/v3/users/{user_id}/api_keys', '/v3/api_keys/{id}', '/v3/teams']) {
      assert.ok(doc.body.paths[path], `missing ${path}`);
    }
    assert.ok(doc.body.paths['/v3/users'].post.responses['400'], 'error responses are documented');
    const docs = await asKey(t.app, undefined).get('/docs/');
    assert.equal(docs.status, 200);
    assert.match(docs.raw, /<script src="\/docs\/redoc.standalone.js">/);
  });
});
