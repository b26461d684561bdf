import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { loadTls } from '../../src/tls.ts';
import { asKey } from '../support/client.ts';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

function request(module: typeof http | typeof https, url: string, options: https.RequestOptions = {}) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = module.get(url, options, (res) => {
      let body = '';
      res.on('data', (chunk) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error('timeout')));
  });
}

describe('TLS', () => {
  let t: TestApp;
  let port: number;
  let cert: string;
  before(async () => {
    t = await startTestApp();
    const tls = await loadTls(t.config);
    assert.equal(tls.generated, true);
    cert = tls.cert;
    await t.close();
    t = await startTestApp({ https: { key: tls.key, cert: tls.cert } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });
  after(() => t.close());

  test('answers HTTPS with the generated localhost certificate', async () => {
    const reply = await request(https, `https://localhost:${port}/health`, { ca: cert });
    assert.equal(reply.status, 200);
    const users = await request(https, `https://localhost:${port}/v3/users`, {
      ca: cert,
      headers: { authorization: `Bearer ${t.adminKey}` },
    });
    assert.equal(users.status, 200);
  });

  test('answers only TLS on its port: plain HTTP gets no HTTP response', async () => {
    await assert.rejects(request(http, `http://127.0.0.1:${port}/health`));
  });

  test('the certificate is generated once into DATA_DIR/tls and reused', async () => {
    const dataDir = t.dataDir;
    const config = loadConfig({ DATA_DIR: dataDir });
    const first = await loadTls(config);
    const second = await loadTls(config);
    assert.equal(second.generated, false);
    assert.equal(second.cert, first.cert);
    assert.equal(await readFile(`${dataDir}/tls/cert.pem`, 'utf8'), first.cert);
  });

  test('TLS_CERT_FILE and TLS_KEY_FILE are used when set', async () => {
    const config = loadConfig({
      DATA_DIR: t.dataDir,
      TLS_CERT_FILE: `${t.dataDir}/tls/cert.pem`,
      TLS_KEY_FILE: `${t.dataDir}/tls/key.pem`,
    });
    const material = await loadTls(config);
    assert.equal(material.generated, false);
    assert.equal(material.certFile, `${t.dataDir}/tls/cert.pem`);
  });
});

describe('TRUST_PROXY', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { TRUST_PROXY: 'true' } });
  });
  after(() => t.close());

  test('a request the proxy did not mark https gets 403 https_required, never a redirect', async () => {
    const client = asKey(t.app, t.adminKey);
    assertProblem(await client.get('/v3/users'), 403, 'https_required');
    assertProblem(await client.get('/v3/users', { 'x-forwarded-proto': 'http' }), 403, 'https_required');
    assert.equal((await client.get('/v3/users', { 'x-forwarded-proto': 'https' })).status, 200);
    assert.equal((await client.get('/v3/users', { 'x-forwarded-proto': 'https, http' })).status, 200, 'the first hop counts');
  });

  test('the health probe of a load balancer is answered on plain HTTP', async () => {
    assert.equal((await asKey(t.app, undefined).get('/health')).status, 200);
  });
});

describe('logs', () => {
  let t: TestApp;
  let lines = '';
  before(async () => {
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines += chunk.toString();
        done();
      },
    });
    t = await startTestApp({ env: { LOG_LEVEL: 'debug' }, logStream: sink });
  });
  after(() => t.close());

  test('API keys never appear in logs, and every line of a request carries its id', async () => {
    const owner = await createUser(t, 'User');
    const made = await asKey(t.app, owner.key).post(`/v3/users/${owner.id}/api_keys`, { name: 'secret' });
    const fresh = made.body.key as string;
    await asKey(t.app, fresh).get(`/v3/users/${owner.id}`, { 'x-request-id': 'log-check-1' });
    await asKey(t.app, fresh).post(`/v3/users/${owner.id}/api_keys`, { name: 'x', bogus: fresh });
    await asKey(t.app, `${fresh.slice(0, -1)}x`).get('/v3/users');
    await asKey(t.app, fresh).get(`/v3/users?email=${fresh}`);
    for (const key of [t.adminKey, owner.key, fresh]) {
      assert.ok(!lines.includes(key.slice(4)), 'a key leaked into the logs');
    }
    const tagged = lines.split('\n').filter((line) => line.includes('log-check-1'));
    assert.ok(tagged.length >= 2, 'request and response lines carry the request id');
    assert.ok(tagged.every((line) => JSON.parse(line).reqId === 'log-check-1'));
  });
});

describe('health when the database is gone', () => {
  test('GET /health answers 503 problem+json', async () => {
    const t = await startTestApp();
    await t.database.close();
    const reply = await asKey(t.app, undefined).get('/health');
    assertProblem(reply, 503, 'database_unavailable');
    await t.close();
  });
});
