import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { MAX_PER_ADDRESS } from '../../src/web/sign-in-throttle.ts';
import { startTestApp, type TestApp, testConfigEnv } from '../support/test-app.ts';
import { csrfToken } from '../web/web-client.ts';

/**
 * Finding 3 of issue 36: with TRUST_PROXY=true Fastify trusted every hop of X-Forwarded-For, so
 * the client named its own address in the header's first entry: 650 unauthenticated requests and
 * 50 sign-ins across 25 accounts never met a limit. Now only the configured proxies are trusted —
 * `true` the one proxy that connects to Hopper, or a list of addresses and CIDRs — and the client
 * is the rightmost address no trusted proxy added.
 */
const LIMIT = 5;
// A still clock mid-window: the rate limit's windows are whole minutes, and a test must not cross one.
const clock = () => new Date('2026-07-01T12:00:30Z');

/** One unauthenticated request arriving from `socket` with this X-Forwarded-For, marked https by the proxy. */
async function through(t: TestApp, socket: string, forwardedFor: string | undefined): Promise<number> {
  const reply = await t.app.inject({
    method: 'GET',
    url: '/v3/openapi.json',
    remoteAddress: socket,
    headers: { 'x-forwarded-proto': 'https', ...(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }) },
  });
  return reply.statusCode;
}

describe('TRUST_PROXY=true: the one proxy that connects', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { TRUST_PROXY: 'true', RATE_LIMIT: String(LIMIT) }, clock });
  });
  after(() => t?.close());

  test('a forged first entry of X-Forwarded-For changes nothing: the address the proxy added is counted', async () => {
    const statuses: number[] = [];
    // The proxy (127.0.0.1 here) appends the address it saw; the client wrote the entries before it.
    for (let i = 0; i < LIMIT + 3; i++) statuses.push(await through(t, '127.0.0.1', `10.9.${i}.1, 192.0.2.${i}, 198.51.100.7`));
    assert.deepEqual(statuses, [...Array(LIMIT).fill(200), 429, 429, 429]);
    assert.equal(await through(t, '127.0.0.1', '10.9.0.1, 198.51.100.8'), 200, 'another client behind the proxy has its own count');
    assert.equal(await through(t, '127.0.0.1', 'not-an-address, 198.51.100.7'), 429, 'junk before it changes nothing either');
  });
});

describe('TRUST_PROXY=true: the sign-in throttle', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { TRUST_PROXY: 'true' } });
  });
  after(() => t?.close());

  test(`${MAX_PER_ADDRESS} failed sign-ins across as many accounts, each with a forged address, and the next is refused`, async () => {
    const statuses: number[] = [];
    for (let i = 0; i <= MAX_PER_ADDRESS; i++) {
      const headers = { 'x-forwarded-proto': 'https', 'x-forwarded-for': `10.8.${i}.1, 198.51.100.9` };
      const form = await t.app.inject({ method: 'GET', url: '/login', remoteAddress: '127.0.0.1', headers });
      const cookie = form.cookies.map((c: { name: string; value: string }) => `${c.name}=${c.value}`).join('; ');
      const body = new URLSearchParams({ _csrf: csrfToken(form.body) ?? '', email: `nobody-${i}@example.com`, password: 'guess' });
      const reply = await t.app.inject({
        method: 'POST',
        url: '/login',
        remoteAddress: '127.0.0.1',
        headers: { ...headers, cookie, 'content-type': 'application/x-www-form-urlencoded' },
        payload: body.toString(),
      });
      statuses.push(reply.statusCode);
    }
    assert.deepEqual(statuses, [...Array(MAX_PER_ADDRESS).fill(422), 429]);
  });
});

describe('TRUST_PROXY as a list of proxies', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { TRUST_PROXY: '10.0.0.0/8, 192.168.1.1', RATE_LIMIT: String(LIMIT) }, clock });
  });
  after(() => t?.close());

  test('the rightmost address not of a listed proxy is the client, however the chain is forged before it', async () => {
    const statuses: number[] = [];
    // A load balancer (10.1.1.1) behind a CDN edge (10.0.0.9): the client's own entries come first.
    for (let i = 0; i < LIMIT; i++) statuses.push(await through(t, '10.1.1.1', `192.0.2.${i}, 203.0.113.5, 10.0.0.9`));
    assert.deepEqual(statuses, Array(LIMIT).fill(200));
    assert.equal(await through(t, '192.168.1.1', '203.0.113.5'), 429, 'the same client through the other listed proxy');
    assert.equal(await through(t, '10.1.1.1', '203.0.113.6, 10.0.0.9'), 200, 'another client');
  });

  test('a connection from an address not listed is its own client: its X-Forwarded-For is not read', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 1; i++) statuses.push(await through(t, '203.0.113.77', `10.0.0.${i + 1}`));
    assert.deepEqual(statuses, [...Array(LIMIT).fill(200), 429]);
  });

  test('TRUST_PROXY takes true, false, or addresses and CIDRs; anything else stops the start', () => {
    const load = (value: string) => loadConfig(testConfigEnv('/nonexistent-hopper-test', { TRUST_PROXY: value }));
    assert.deepEqual([load('true').trustProxy, load('true').trustedProxies], [true, []]);
    assert.equal(load('false').trustProxy, false);
    assert.deepEqual(load(' 10.0.0.0/8 ,2001:db8::/32, 192.168.1.1 ').trustedProxies, ['10.0.0.0/8', '2001:db8::/32', '192.168.1.1']);
    for (const bad of ['maybe', '10.0.0.0/33', '10.0.0.1, proxy.example.com', '300.1.1.1']) {
      assert.throws(
        () => load(bad),
        (error: Error) =>
          error instanceof ConfigError && /TRUST_PROXY must be true, false, or a comma list of addresses or CIDRs/.test(error.message),
        bad,
      );
    }
  });
});
