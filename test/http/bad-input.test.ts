import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey, type Reply } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** Hostile and malformed input on every endpoint: always a clear 4xx problem, never a 500. */
describe('bad input', () => {
  let t: TestApp;
  let admin: ReturnType<typeof asKey>;
  let someone: Actor;
  let keyId: number;
  let teamId: number;

  before(async () => {
    t = await startTestApp();
    admin = asKey(t.app, t.adminKey);
    teamId = await createTeam(t);
    someone = await createUser(t, 'User', teamId);
    keyId = (await admin.get(`/v3/users/${someone.id}/api_keys`)).body.data[0].id;
  });
  after(() => t.close());

  function assertClientError(reply: Reply, what: string, status?: number): void {
    assert.ok(reply.status >= 400 && reply.status < 500, `${what}: got ${reply.status} ${reply.raw}`);
    if (status) assert.equal(reply.status, status, `${what}: ${reply.raw}`);
    assert.match(String(reply.headers['content-type']), /^application\/problem\+json/, what);
    assert.ok(reply.body.message.length > 0, what);
  }

  const bodyEndpoints = () => [
    { method: 'POST', url: '/v3/teams', valid: { name: 'T' } },
    { method: 'POST', url: '/v3/users', valid: { first_name: 'A', last_name: 'B', email: `x${Date.now()}@example.com` } },
    { method: 'PUT', url: `/v3/users/${someone.id}`, valid: { first_name: 'A' } },
    { method: 'POST', url: `/v3/users/${someone.id}/api_keys`, valid: { name: 'k' } },
  ];

  test('wrong types on every body field name the field', async () => {
    const wrong: Record<string, unknown[]> = {
      name: [5, true, [], {}, null],
      first_name: [5, [], {}, null],
      last_name: [false, {}],
      email: [1, 'not an email', null],
      phone: [123, {}],
      time_zone: [7, 'Mars/Olympus_Mons', 'America/New York'],
      roles: ['User', ['Emperor'], [], ['User', 'User'], [1]],
      team_id: ['1', 1.5, -3, 0, { id: 1 }, 9_007_199_254_740_992],
    };
    for (const { method, url, valid } of bodyEndpoints()) {
      const fields = url === '/v3/teams' || url.endsWith('api_keys') ? ['name'] : Object.keys(wrong).filter((f) => f !== 'name');
      for (const field of fields) {
        for (const value of wrong[field] ?? []) {
          const reply = await admin.send(method as 'POST', url, { ...valid, [field]: value });
          assertClientError(reply, `${method} ${url} ${field}=${JSON.stringify(value)}`, 400);
          assert.ok(
            Object.keys(reply.body.errors ?? {}).some((k) => k.startsWith(field)),
            `${field} is named: ${reply.raw}`,
          );
        }
      }
    }
  });

  test('missing required and unknown fields; non-object bodies', async () => {
    for (const { method, url } of bodyEndpoints()) {
      const unknown = await admin.send(method as 'POST', url, { surprise: 1 });
      assertClientError(unknown, `${url} unknown`, 400);
      assert.deepEqual(unknown.body.errors.surprise, ['is not a known field']);
      for (const body of ['[]', '"text"', '42', 'null']) {
        assertClientError(await admin.send(method as 'POST', url, body, { 'content-type': 'application/json' }), `${url} ${body}`, 400);
      }
      if (method === 'POST') {
        const missing = await admin.send('POST', url, {});
        assertClientError(missing, `${url} empty`, 400);
        assert.ok(Object.values(missing.body.errors).some((m) => (m as string[]).includes('is required')));
      }
    }
  });

  test('10 MB bodies are refused with 413 on every body endpoint', async () => {
    const huge = JSON.stringify({ name: 'x'.repeat(10 * 1024 * 1024) });
    for (const { method, url } of bodyEndpoints()) {
      assertClientError(await admin.send(method as 'POST', url, huge, { 'content-type': 'application/json' }), `${url} huge`, 413);
    }
  });

  test('deeply nested, NUL-carrying and malformed JSON bodies are 400', async () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    assertClientError(await admin.send('POST', '/v3/teams', deep, { 'content-type': 'application/json' }), 'deep', 400);
    assertClientError(await admin.post('/v3/teams', { name: 'a\u0000b' }), 'NUL', 400);
    assertClientError(
      await admin.send('POST', '/v3/teams', '{"name":"x",}', { 'content-type': 'application/json' }),
      'trailing comma',
      400,
    );
    assertClientError(await admin.send('POST', '/v3/teams', '{"__proto__":{"x":1}}', { 'content-type': 'application/json' }), 'proto', 400);
  });

  test('ids that are not positive integers, or overflow, are 400 on every id route', async () => {
    const routes = (id: string) => [
      ['GET', `/v3/users/${id}`],
      ['PUT', `/v3/users/${id}`],
      ['POST', `/v3/users/${id}/cancel`],
      ['GET', `/v3/users/${id}/api_keys`],
      ['POST', `/v3/users/${id}/api_keys`],
      ['GET', `/v3/api_keys/${id}`],
      ['DELETE', `/v3/api_keys/${id}`],
      ['GET', `/v3/teams/${id}`],
    ];
    for (const id of ['abc', '1.5', '-1', '0', '99999999999999999999', '9007199254740993', '1%27%20OR%201=1', '%00']) {
      for (const [method, url] of routes(id)) {
        const body = method === 'GET' || method === 'DELETE' ? undefined : method === 'PUT' ? { first_name: 'x' } : { name: 'x' };
        const reply = await admin.send(method as 'GET', url as string, body);
        assertClientError(reply, `${method} ${url}`, 400);
      }
    }
  });

  test('SQL and HTML in strings are stored and returned verbatim, never executed', async () => {
    const nasty = [`Robert'); DROP TABLE users;--`, '<script>alert(1)</script><img src=x onerror=alert(2)>', '%_\\', '😀 ünïcödé'];
    for (const name of nasty) {
      const created = await admin.post('/v3/teams', { name });
      assert.equal(created.status, 201, created.raw);
      assert.equal(created.body.name, name);
      const found = await admin.get(`/v3/teams?name=${encodeURIComponent(name)}`);
      assert.equal(found.status, 200, found.raw);
      assert.ok(
        found.body.data.some((team: { name: string }) => team.name === name),
        `search finds ${name}`,
      );
    }
    const injection = await admin.get(`/v3/users?email=${encodeURIComponent("' OR 1=1 --")}`);
    assert.equal(injection.status, 200);
    assert.equal(injection.body.meta.total, 0);
    const wildcard = await admin.get('/v3/teams?name=%25');
    assert.ok(
      wildcard.body.data.every((team: { name: string }) => team.name.includes('%')),
      'LIKE wildcards are literal',
    );
    assert.equal((await admin.get('/v3/users')).status, 200, 'users table still there');
  });

  test('bad search parameters are 400 naming the parameter and the allowed filters', async () => {
    for (const query of [
      'page=0',
      'page=abc',
      'per_page=0',
      'per_page=101',
      'per_page=1.5',
      'status=Gone',
      'team_id=abc',
      'nope=1',
      'email=%00',
      `name=${'x'.repeat(300)}`,
    ]) {
      for (const url of ['/v3/users', '/v3/teams', `/v3/users/${someone.id}/api_keys`]) {
        const reply = await admin.get(`${url}?${query}`);
        if (reply.status === 200) continue; // a filter this collection does not have is caught below
        assertClientError(reply, `${url}?${query}`, 400);
      }
    }
    const unknown = await admin.get('/v3/users?nope=1');
    assert.match(unknown.body.errors.nope[0], /allowed: page, per_page, id, team_id/);
  });

  test('other users’ ids: a User probing ids learns nothing (403 for all)', async () => {
    const probe = asKey(t.app, someone.key);
    for (const id of [t.adminId, someone.id + 1000]) {
      assert.equal((await probe.get(`/v3/users/${id}`)).status, 403);
      assert.equal((await probe.put(`/v3/users/${id}`, { first_name: 'pwned' })).status, 403);
    }
    const adminKeyId = (await admin.get(`/v3/users/${t.adminId}/api_keys`)).body.data[0].id;
    assert.equal((await probe.get(`/v3/api_keys/${adminKeyId}`)).status, 403);
    assert.equal((await probe.delete(`/v3/api_keys/${adminKeyId}`)).status, 403);
    assert.equal((await probe.get(`/v3/api_keys/${keyId}`)).status, 200, 'their own key is fine');
  });
});
