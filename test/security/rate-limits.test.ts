import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { generateApiKey } from '../../src/api-key-format.ts';
import { asKey } from '../support/client.ts';
import { createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

const LIMIT = 10;
// A still clock mid-window: the counting windows are whole minutes, and a test must not cross one.
const clock = () => new Date('2026-07-01T12:00:30Z');

/** Sends `count` requests from one address; the statuses. */
async function burst(
  t: TestApp,
  count: number,
  request: { method?: 'GET' | 'POST'; url: string; headers?: Record<string, string> },
  remoteAddress: string,
) {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) {
    const reply = await t.app.inject({ method: request.method ?? 'GET', url: request.url, headers: request.headers, remoteAddress });
    statuses.push(reply.statusCode);
  }
  return statuses;
}

/**
 * Findings: the limiter counted the digest of whatever Bearer token a request carried, also on
 * routes that never check one (any token bought a fresh count); a 401 was answered before the
 * limiter ran (never limited, no headers); and a User's count multiplied with every key minted.
 */
describe('one rate-limit identity per request', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { RATE_LIMIT: String(LIMIT), RATE_LIMIT_PER_USER: String(2 * LIMIT) }, clock });
  });
  after(() => t.close());

  const publicRoutes: { name: string; method?: 'GET' | 'POST'; url: string }[] = [
    { name: 'the OpenAPI document', url: '/v3/openapi.json' },
    { name: 'the sign-in page', url: '/login' },
    { name: 'an unsubscribe link', url: '/unsubscribe/not-a-token' },
    { name: 'an open pixel', url: '/t/o/not-a-token.gif' },
    { name: 'a click link', url: '/t/c/not-a-token' },
    { name: "a provider's webhook", method: 'POST', url: '/v3/webhooks/sendgrid' },
  ];
  publicRoutes.forEach(({ name, method, url }, i) => {
    test(`${name}: an address at its limit gets 429, whatever Bearer token it adds`, async () => {
      const address = `10.0.${i}.1`;
      const first = await burst(t, LIMIT, { method, url }, address);
      assert.ok(!first.includes(429), `within the limit: ${first}`);
      const over = await burst(t, 1, { method, url }, address);
      assert.deepEqual(over, [429]);
      for (const token of ['random123', generateApiKey()]) {
        const dodged = await burst(t, 3, { method, url, headers: { authorization: `Bearer ${token}` } }, address);
        assert.deepEqual(dodged, [429, 429, 429], `Bearer ${token.slice(0, 8)}…`);
      }
    });
  });

  test('requests refused as unauthenticated (401) are counted against the address, and carry the headers', async () => {
    const address = '10.1.0.1';
    const kinds = [
      {},
      { authorization: 'Basic abc' },
      { authorization: 'Bearer not-a-key' },
      { authorization: `Bearer ${generateApiKey()}` },
    ];
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 4; i++) {
      const reply = await t.app.inject({ method: 'GET', url: '/v3/users', headers: kinds[i % kinds.length], remoteAddress: address });
      statuses.push(reply.statusCode);
      assert.ok(reply.headers['ratelimit-limit'], `answer ${i + 1} has RateLimit-Limit`);
      assert.match(String(reply.headers['ratelimit-policy']), /^"address";q=10;w=60$/);
      assert.match(String(reply.headers.ratelimit), /^"address";r=\d+;t=\d+$/);
      if (reply.statusCode === 429) assert.ok(Number(reply.headers['retry-after']) >= 1);
    }
    assert.deepEqual(statuses, [...Array(LIMIT).fill(401), 429, 429, 429, 429]);
    // Another address is not affected.
    assert.equal((await t.app.inject({ method: 'GET', url: '/v3/users', remoteAddress: '10.1.0.2' })).statusCode, 401);
  });

  test("a user's keys share one ceiling (RATE_LIMIT_PER_USER), and each key has its own limit", async () => {
    const user = await createUser(t, 'User');
    const keys = [user.key];
    for (let i = 0; i < 4; i++) keys.push((await asKey(t.app, user.key).post(`/v3/users/${user.id}/api_keys`, { name: `k${i}` })).body.key);
    // The mints above used 4 of the first key's 10 and of the user's 20.
    let served = 4;
    const statuses: number[] = [];
    const details = new Set<string>();
    for (const key of keys) {
      for (let i = 0; i < LIMIT; i++) {
        const reply = await asKey(t.app, key).get(`/v3/users/${user.id}`);
        statuses.push(reply.status);
        if (reply.status === 200) served++;
        else details.add(reply.body.detail.replace(/retry in \d+ s/, 'retry in …'));
        assert.match(String(reply.headers['ratelimit-policy']), /^"key";q=10;w=60, "user";q=20;w=60$/);
      }
    }
    assert.equal(served, 2 * LIMIT, `the user's ceiling holds across keys: ${statuses}`);
    // The first key met its own limit; the third met the user's.
    assert.deepEqual(
      [...details],
      [
        'Rate limit of 10 requests per minute per API key exceeded; retry in ….',
        "Rate limit of 20 requests per minute per user, across all of the user's keys exceeded; retry in ….",
      ],
    );
  });
});
