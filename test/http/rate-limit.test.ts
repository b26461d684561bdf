import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { buildApp } from '../../src/app.ts';
import { openDatabase } from '../../src/db/database.ts';
import { openJobQueue } from '../../src/db/job-queue.ts';
import type { App } from '../../src/http/fastify-types.ts';
import { freePort } from '../sending/support/hopper-process.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp, usingPostgres } from '../support/test-app.ts';
import { tools } from '../support/tools.ts';

/** Rate limits per API key: the default of 600 a minute, the headers, and one count across processes. */
describe('rate limits', () => {
  let t: TestApp;
  let user: Actor;
  before(async () => {
    // A still clock, mid-window: the counting windows are whole minutes, and this slow test must not cross one.
    t = await startTestApp({ env: { RATE_LIMIT: '600' }, clock: () => new Date('2026-07-01T12:00:30Z') });
    user = await createUser(t, 'User');
  });
  after(() => t.close());

  test('600 a minute per key: every answer has the headers, the 601st is a 429 problem with Retry-After', async () => {
    const api = asKey(t.app, user.key);
    for (let i = 1; i <= 600; i++) {
      const reply = await api.get(`/v3/users/${user.id}`);
      assert.equal(reply.status, 200, `request ${i}: ${reply.raw}`);
      assert.equal(reply.headers['ratelimit-limit'], '600');
      assert.equal(reply.headers['ratelimit-remaining'], String(600 - i));
      const reset = Number(reply.headers['ratelimit-reset']);
      assert.equal(reset, 30);
    }
    const refused = await api.get(`/v3/users/${user.id}`);
    assertProblem(refused, 429, 'too_many_requests');
    assert.equal(refused.headers['ratelimit-limit'], '600');
    assert.equal(refused.headers['ratelimit-remaining'], '0');
    const retryAfter = Number(refused.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 60, String(refused.headers['retry-after']));
    // A POST is refused too, and creates nothing.
    assertProblem(await api.post(`/v3/users/${user.id}/tags`, { name: 'over' }), 429);
    // The count is kept in allotments of a fiftieth of the limit (12): 51 statements for these 602
    // requests, not one each; never more than the limit served.
    const keyId = (await asKey(t.app, t.adminKey).get(`/v3/users/${user.id}/api_keys`)).body.data[0].id;
    const stored = await t.database.db.selectFrom('rate_limit_counts').select('count').where('key', '=', `key:${keyId}`).execute();
    assert.deepEqual(
      stored.map((r) => Number(r.count)),
      [612],
    );
    // Another key has its own count; so do unknown routes' answers carry the headers.
    const admin = await asKey(t.app, t.adminKey).get(`/v3/users/${user.id}`);
    assert.equal(admin.status, 200);
    assert.ok(Number(admin.headers['ratelimit-remaining']) >= 590, String(admin.headers['ratelimit-remaining']));
    const missing = await asKey(t.app, t.adminKey).get('/v3/nothing-here');
    assert.equal(missing.status, 404);
    assert.equal(missing.headers['ratelimit-limit'], '600');
  });
});

describe('rate limits across API processes', () => {
  let a: TestApp;
  let b: { app: App; close(): Promise<void> } | undefined;
  before(async () => {
    a = await startTestApp({ env: { RATE_LIMIT: '10' } });
    if (!usingPostgres) return;
    // A second API on the same PostgreSQL schema: another process as far as the counts can tell.
    const database = await openDatabase(a.config);
    const queue = await openJobQueue(database, a.config);
    const app = await buildApp(a.config, { database, queue });
    await app.ready();
    b = {
      app,
      async close() {
        await app.close();
        await queue.stop();
        await database.close();
      },
    };
  });
  after(async () => {
    await b?.close();
    await a.close();
  });

  test('two API instances on one PostgreSQL share the count', async (t) => {
    if (!b) return t.skip('needs PostgreSQL: set DATABASE_URL (CI runs the suite on both databases)');
    const first = asKey(a.app, a.adminKey);
    const second = asKey(b.app, a.adminKey);
    for (let i = 0; i < 5; i++) {
      assert.equal((await first.get(`/v3/users/${a.adminId}`)).status, 200);
      assert.equal((await second.get(`/v3/users/${a.adminId}`)).status, 200);
    }
    assert.equal((await second.get(`/v3/users/${a.adminId}`)).status, 429);
    assert.equal((await first.get(`/v3/users/${a.adminId}`)).status, 429);
  });
});

describe('rate limits shared through Redis (REDIS_URL)', { skip: tools.redisServer.skip }, () => {
  let redis: ChildProcess | undefined;
  const apps: TestApp[] = [];
  before(async () => {
    const port = await freePort();
    // A real redis-server, with nothing kept on disk.
    redis = spawn(tools.redisServer.path as string, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    const started = await new Promise<boolean>((resolve) => {
      redis?.once('error', () => resolve(false));
      setTimeout(() => resolve(true), 300);
    });
    if (!started) return;
    // Two installations with separate databases: only Redis can make them share a count.
    const env = { RATE_LIMIT: '10', REDIS_URL: `redis://127.0.0.1:${port}` };
    apps.push(await startTestApp({ env }));
    apps.push(await startTestApp({ env }));
  });
  after(async () => {
    for (const app of apps) await app.close();
    redis?.kill();
  });

  test('two API instances count together in Redis', async (t) => {
    if (apps.length < 2) return t.skip('redis-server is not installed');
    const [a, b] = apps as [TestApp, TestApp];
    // Without a key the count is the client address's: the same for both instances here (on a
    // public route; /health is never counted).
    await waitFor('Redis', async () => (await asKey(a.app, undefined).get('/v3/openapi.json')).status === 200);
    for (let used = 2; used <= 10; used++) {
      const reply = await asKey(used % 2 ? a.app : b.app, undefined).get('/v3/openapi.json');
      assert.equal(reply.status, 200, reply.raw);
      assert.equal(reply.headers['ratelimit-remaining'], String(10 - used));
    }
    assertProblem(await asKey(b.app, undefined).get('/v3/openapi.json'), 429);
    assertProblem(await asKey(a.app, undefined).get('/v3/openapi.json'), 429);
  });
});
