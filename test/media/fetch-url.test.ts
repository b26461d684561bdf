import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { asKey, fetchBytes, filesUnder, mp3File, storedFiles, wavFile } from './fixtures.ts';

const LIMIT = 64 * 1024;
const mp3 = mp3File(3);
const big = wavFile(5); // 80 KB: over LIMIT

/** A local server playing the remote side: a file, a redirect, errors, a stall, an oversized stream. */
async function startRemote(): Promise<{ server: Server; base: string }> {
  const server = createServer((request, response) => {
    switch (request.url) {
      case '/audio/open-house.mp3':
        response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': mp3.length }).end(mp3);
        return;
      case '/moved':
        response.writeHead(302, { location: '/audio/open-house.mp3' }).end();
        return;
      case '/to-ftp':
        response.writeHead(302, { location: 'ftp://example.com/x.mp3' }).end();
        return;
      case '/page.html':
        response.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>not audio</body></html>');
        return;
      case '/declared-big.wav':
        response.writeHead(200, { 'content-length': big.length }).end(big);
        return;
      case '/streamed-big.wav':
        // No Content-Length: the cap has to trip while the bytes arrive.
        response.writeHead(200, { 'transfer-encoding': 'chunked' });
        response.write(big.subarray(0, 40_000));
        response.end(big.subarray(40_000));
        return;
      case '/stall':
        response.writeHead(200);
        response.write(mp3.subarray(0, 100)); // then never finish
        return;
      default:
        response.writeHead(404).end('no');
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('media created from a URL', () => {
  let t: TestApp;
  let guarded: TestApp;
  let remote: Awaited<ReturnType<typeof startRemote>>;
  let user: Awaited<ReturnType<typeof createUser>>;
  before(async () => {
    remote = await startRemote();
    t = await startTestApp({ env: { MEDIA_FETCH_ALLOW_PRIVATE: 'true', MEDIA_MAX_BYTES: String(LIMIT), MEDIA_FETCH_TIMEOUT: '1s' } });
    guarded = await startTestApp();
    user = await createUser(t, 'User');
  });
  after(async () => {
    await t.close();
    await guarded.close();
    remote.server.closeAllConnections();
    remote.server.close();
  });

  const create = (body: unknown, app = t, key = user.key, userId = user.id) => asKey(app.app, key).post(`/v3/users/${userId}/media`, body);

  test('Hopper fetches the file, judges it from its bytes and serves the same bytes', async () => {
    const reply = await create({ full_url: `${remote.base}/audio/open-house.mp3` });
    assert.equal(reply.status, 201, reply.raw);
    assert.equal(reply.body.name, 'open-house');
    assert.equal(reply.body.file_name, 'open-house.mp3');
    assert.equal(reply.body.mime_type, 'audio/mpeg');
    assert.equal(reply.body.size, mp3.length);
    assert.equal(reply.body.collection_name, 'audio');
    const file = await fetchBytes(t.app, reply.body.full_url);
    assert.equal(file.headers['content-type'], 'audio/mpeg');
    assert.ok(file.bytes.equals(mp3));
  });

  test('redirects are followed; name and read-only fields sent back are handled', async () => {
    const reply = await create({ full_url: `${remote.base}/moved`, name: 'From a redirect', id: 5, size: 1, readable_size: 'x' });
    assert.equal(reply.status, 201, reply.raw);
    assert.equal(reply.body.name, 'From a redirect');
    assert.equal(reply.body.size, mp3.length);
  });

  test('remote failures are 400s naming full_url', async () => {
    const cases: [string, RegExp][] = [
      [`${remote.base}/missing.mp3`, /HTTP 404/],
      [`${remote.base}/page.html`, /audio/],
      [`${remote.base}/to-ftp`, /not http/],
      [`${remote.base}/stall`, /did not arrive within 1 s/],
      ['http://127.0.0.1:1/x.mp3', /refused the connection/],
      ['http://no-such-host.invalid/x.mp3', /does not resolve/],
      ['ftp://example.com/x.mp3', /http:\/\/ or https:\/\//],
      ['not a url', /http:\/\/ or https:\/\//],
      ['file:///etc/passwd', /http:\/\/ or https:\/\//],
    ];
    for (const [url, message] of cases) {
      const reply = await create({ full_url: url });
      assertProblem(reply, 400, 'validation');
      assert.deepEqual(Object.keys(reply.body.errors), ['full_url'], url);
      assert.match(reply.body.errors.full_url[0], message, url);
    }
    assert.deepEqual(await filesUnder(join(t.dataDir, 'media-incoming')), []);
  });

  test('a remote file over the limit is 413, whether it says so up front or not', async () => {
    const before = await storedFiles(t);
    assertProblem(await create({ full_url: `${remote.base}/declared-big.wav` }), 413, 'payload_too_large');
    assertProblem(await create({ full_url: `${remote.base}/streamed-big.wav` }), 413, 'payload_too_large');
    assert.deepEqual(await storedFiles(t), before);
    assert.deepEqual(await filesUnder(join(t.dataDir, 'media-incoming')), []);
  });

  test('by default loopback and private addresses are refused (no SSRF), names included', async () => {
    const owner = await createUser(guarded, 'User');
    for (const url of [
      `${remote.base}/audio/open-house.mp3`,
      `http://localhost:${new URL(remote.base).port}/audio/open-house.mp3`,
      'http://[::1]/x.mp3',
      'http://169.254.169.254/latest/meta-data',
      'http://10.1.2.3/x.mp3',
      'http://[::ffff:127.0.0.1]/x.mp3',
    ]) {
      const reply = await create({ full_url: url }, guarded, owner.key, owner.id);
      assertProblem(reply, 400, 'validation');
      assert.match(reply.body.errors.full_url[0], /private or loopback/, url);
    }
  });

  test('the public URL works over a real socket: ranges and HEAD', async () => {
    const created = await create({ full_url: `${remote.base}/audio/open-house.mp3` });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (t.app.server.address() as AddressInfo).port;
    const url = `http://127.0.0.1:${port}${new URL(created.body.full_url).pathname}`;
    const whole = await fetch(url);
    assert.equal(whole.status, 200);
    assert.ok(Buffer.from(await whole.arrayBuffer()).equals(mp3));
    const part = await fetch(url, { headers: { range: 'bytes=417-833' } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), `bytes 417-833/${mp3.length}`);
    assert.ok(Buffer.from(await part.arrayBuffer()).equals(mp3.subarray(417, 834)));
    const head = await fetch(url, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(mp3.length));
    assert.equal(head.headers.get('content-type'), 'audio/mpeg');
  });
});
