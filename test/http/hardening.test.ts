import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';
import { generateApiKey } from '../../src/api-key-format.ts';
import { loadTls } from '../../src/tls.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * HTTPS answers (the real server on a port, TLS as `npm start` serves it): security headers on
 * every answer, errors included; TLS 1.2 only with AEAD suites; errors Node's parser raises
 * (431, a malformed request) as problem+json, without a body for HEAD; no secret in the log.
 */
let t: TestApp;
let port: number;
let cert: string;
let logged = '';

before(async () => {
  const first = await startTestApp();
  const material = await loadTls(first.config);
  cert = material.cert;
  await first.close();
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logged += chunk.toString();
      done();
    },
  });
  t = await startTestApp({ https: { key: material.key, cert: material.cert }, env: { LOG_LEVEL: 'debug' }, logStream: sink });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
});
after(() => t.close());

interface Raw {
  head: string;
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends `text` as it is over TLS and reads the answer until the server closes (or 3 s pass). */
function raw(text: string, options: tls.ConnectionOptions = {}): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: cert, ...options }, () => socket.write(text));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk) => {
      data += chunk;
    });
    socket.setTimeout(3000, () => socket.end());
    socket.on('error', reject);
    socket.on('close', () => {
      const end = data.indexOf('\r\n\r\n');
      const head = data.slice(0, end);
      const [statusLine, ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ head, status: Number(statusLine?.split(' ')[1]), headers, body: data.slice(end + 4) });
    });
  });
}

const request = (method: string, path: string, headers: Record<string, string> = {}, body = '') =>
  raw(
    `${method} ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}${body ? `Content-Length: ${Buffer.byteLength(body)}\r\n` : ''}\r\n${body}`,
  );

function assertSecurityHeaders(reply: Raw, what: string) {
  assert.match(reply.headers['strict-transport-security'] ?? '', /max-age=\d{7,}/, `${what}: HSTS`);
  assert.equal(reply.headers['x-content-type-options'], 'nosniff', `${what}: nosniff`);
}

describe('HTTPS answers', () => {
  test('Strict-Transport-Security and X-Content-Type-Options on the API, /docs, /unsubscribe, /health and errors', async () => {
    const auth = { authorization: `Bearer ${t.adminKey}` };
    for (const [what, reply] of [
      ['GET /v3/users', await request('GET', '/v3/users', auth)],
      ['401', await request('GET', '/v3/users')],
      ['404', await request('GET', '/nowhere')],
      ['/health', await request('GET', '/health')],
      ['/docs', await request('GET', '/docs/')],
      ['/unsubscribe', await request('GET', '/unsubscribe/not-a-token')],
      ['bad JSON', await request('POST', '/v3/teams', { ...auth, 'content-type': 'application/json' }, '{')],
      ['431', await request('GET', `/v3/users?q=${'x'.repeat(20_000)}`)],
    ] as const) {
      assert.ok(reply.status > 0, `${what}: answered`);
      assertSecurityHeaders(reply, what);
    }
  });

  test('TLS 1.2 only with AEAD suites: CBC and TLS 1.1 are refused, GCM and ChaCha20 accepted', async () => {
    const handshake = (options: tls.ConnectionOptions) =>
      new Promise<string>((resolve, reject) => {
        const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: cert, ...options }, () => {
          const cipher = socket.getCipher().name;
          socket.end();
          resolve(cipher);
        });
        socket.on('error', reject);
      });
    for (const cipher of ['ECDHE-ECDSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA384', 'ECDHE-ECDSA-AES128-SHA256', 'AES128-GCM-SHA256']) {
      await assert.rejects(handshake({ maxVersion: 'TLSv1.2', ciphers: cipher }), `${cipher} is refused`);
    }
    await assert.rejects(handshake({ maxVersion: 'TLSv1.1', minVersion: 'TLSv1', ciphers: 'DEFAULT@SECLEVEL=0' }), 'TLS 1.1 is refused');
    assert.equal(await handshake({ maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' }), 'ECDHE-ECDSA-AES128-GCM-SHA256');
    assert.equal(await handshake({ maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-CHACHA20-POLY1305' }), 'ECDHE-ECDSA-CHACHA20-POLY1305');
    assert.match(await handshake({}), /^TLS_/, 'TLS 1.3 by default');
  });
});

describe('errors of the HTTP parser', () => {
  test('431 (an oversized query) is problem+json for GET, and has no body at all for HEAD', async () => {
    const get = await request('GET', `/v3/users?q=${'x'.repeat(20_000)}`);
    assert.equal(get.status, 431);
    assert.match(get.headers['content-type'] ?? '', /^application\/problem\+json/);
    const problem = JSON.parse(get.body);
    assert.equal(problem.status, 431);
    assert.match(problem.type, /request_header_fields_too_large$/);
    assert.equal(Number(get.headers['content-length']), Buffer.byteLength(get.body));

    const head = await request('HEAD', `/v3/users?q=${'x'.repeat(20_000)}`);
    assert.equal(head.status, 431);
    assert.match(head.headers['content-type'] ?? '', /^application\/problem\+json/);
    assert.equal(head.body, '', 'HEAD: no body');

    // Past what the parser lets through at all (64 KiB): still 431 problem+json, never a body for HEAD.
    const huge = await request('HEAD', `/v3/users?q=${'x'.repeat(70_000)}`);
    assert.equal(huge.status, 431);
    assert.match(huge.headers['content-type'] ?? '', /^application\/problem\+json/);
    assert.equal(huge.body, '', 'HEAD: no body');
  });

  test('a malformed request line is a 400 problem+json', async () => {
    const reply = await raw('GET /v3/users HTTP/1.1 extra\r\nHost: localhost\r\n\r\n');
    assert.equal(reply.status, 400);
    assert.match(reply.headers['content-type'] ?? '', /^application\/problem\+json/);
    assert.equal(JSON.parse(reply.body).status, 400);
    const badHeader = await raw('GET /health HTTP/1.1\r\nHost: localhost\r\nBad Header: x\r\n\r\n');
    assert.equal(badHeader.status, 400);
    assert.equal(JSON.parse(badHeader.body).title, 'Bad request');
  });

  test('HEAD answers carry no body, errors included', async () => {
    for (const path of ['/health', '/v3/users', '/v3/users/999999', '/v3/users/x', '/nowhere']) {
      const reply = await request('HEAD', path, { authorization: `Bearer ${t.adminKey}` });
      assert.ok(reply.status >= 200, `HEAD ${path} answered`);
      assert.equal(reply.body, '', `HEAD ${path}: no body (status ${reply.status})`);
    }
  });
});

describe('fragments', () => {
  test('/v3/api_keys/ID#x is refused (400), never acted on as key ID', async () => {
    const auth = { authorization: `Bearer ${t.adminKey}` };
    const made = await request('POST', `/v3/users/${t.adminId}/api_keys`, { ...auth, 'content-type': 'application/json' }, '{"name":"x"}');
    const id = JSON.parse(made.body).id;
    const refused = await request('DELETE', `/v3/api_keys/${id}#x`, auth);
    assert.equal(refused.status, 400);
    assert.match(JSON.parse(refused.body).detail, /#/);
    assert.equal((await request('GET', `/v3/api_keys/${id}`, auth)).status, 200, 'the key is still live');
  });
});

describe('secrets stay out of the log', () => {
  test('capability tokens in paths, secret query values and API keys anywhere in a request are redacted', async () => {
    const mediaToken = 'AbCdEfGhIjKlMnOpQrStUvWxYz012345';
    const unsubscribeToken = 'unsubscribe-secret-token-0123456789';
    const openToken = 'open-secret-token-0123456789';
    const clickToken = 'click-secret-token-0123456789';
    const slybroadcastToken = 'slybroadcast-secret-token-0123456789';
    const dropCowboyToken = 'dropcowboy-secret-token-0123456789';
    const key = generateApiKey();
    const auth = { authorization: `Bearer ${t.adminKey}` };
    await request('GET', `/v3/media/${mediaToken}/voice.wav`);
    await request('HEAD', `/v3/media/${mediaToken}/voice.wav`);
    await request('GET', `/unsubscribe/${unsubscribeToken}`);
    await request('GET', `/t/o/${openToken}.gif`);
    await request('GET', `/t/c/${clickToken}?u=https%3A%2F%2Fexample.test`);
    await request(
      'POST',
      `/v3/webhooks/slybroadcast/${slybroadcastToken}`,
      { 'content-type': 'application/x-www-form-urlencoded' },
      'var=x',
    );
    await request('POST', `/v3/webhooks/dropcowboy/callback/${dropCowboyToken}`, { 'content-type': 'application/json' }, '{}');
    await request(
      'POST',
      `/v3/callbacks/slybroadcast/${slybroadcastToken}`,
      { 'content-type': 'application/x-www-form-urlencoded' },
      'var=x',
    );
    await request('POST', `/v3/callbacks/dropcowboy/callback/${dropCowboyToken}`, { 'content-type': 'application/json' }, '{}');
    await request('GET', `/v3/users?${key}=1`, auth);
    await request('GET', `/v3/users?email=${key}`, auth);
    await request('GET', `/v3/users?api_key=secret-value-123`, auth);
    await request('POST', '/v3/teams', { ...auth, 'content-type': 'application/json' }, JSON.stringify({ name: 'x', [key]: 1 }));
    await request('POST', '/v3/teams', { ...auth, 'content-type': 'application/json' }, JSON.stringify({ [key]: { [key]: key } }));
    await request('GET', '/v3/users', { authorization: `Bearer ${key}` });
    await request('GET', '/v3/users', { 'x-api-key': key, 'x-request-id': 'secret-check' });
    assert.ok(logged.includes('/v3/media/[redacted]/voice.wav'), 'the media request was logged, redacted');
    assert.ok(logged.includes('/v3/webhooks/dropcowboy/callback/[redacted]'), 'the callback was logged, redacted');
    assert.ok(logged.includes('/v3/callbacks/dropcowboy/callback/[redacted]'), 'the callback at its new path was logged, redacted');
    assert.ok(logged.includes('/v3/callbacks/slybroadcast/[redacted]'), 'the disposition at its new path was logged, redacted');
    for (const secret of [
      mediaToken,
      unsubscribeToken,
      openToken,
      clickToken,
      slybroadcastToken,
      dropCowboyToken,
      key.slice(4),
      'secret-value-123',
    ]) {
      assert.ok(!logged.includes(secret), `a secret leaked into the log: ${secret}`);
    }
  });
});
