import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { upload, wavFile } from '../../../test/media/fixtures.ts';
import { startTestApp, type TestApp } from '../../../test/support/test-app.ts';
import { type Contact, createHopper, HopperProblem, unwrap } from '../src/index.ts';

/** The typed client against a live Hopper over HTTP, and against small servers that misbehave. */
describe('TypeScript client', () => {
  let t: TestApp;
  let url: string;
  before(async () => {
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/v3`;
  });
  after(() => t.close());

  test('creates with named types, reads problems as HopperProblem, iterates over 3 pages', async () => {
    const hopper = createHopper({ url, key: t.adminKey });
    const created: Contact[] = [];
    for (let i = 0; i < 7; i++) {
      created.push(
        await unwrap(
          hopper.api.POST('/v3/users/{user_id}/contacts', {
            params: { path: { user_id: t.adminId } },
            body: { email: `c${i}@example.com`, tags: ['Client'] },
          }),
        ),
      );
    }
    assert.equal(created[0]?.email, 'c0@example.com');
    const seen: number[] = [];
    for await (const contact of hopper.paginate('/v3/users/{user_id}/contacts', { path: { user_id: t.adminId }, query: { per_page: 3 } })) {
      seen.push(contact.id);
    }
    assert.deepEqual(
      seen,
      created.map((c) => c.id),
      'all 7 contacts over pages of 3, 3 and 1',
    );

    const missing = await unwrap(hopper.api.GET('/v3/contacts/{id}', { params: { path: { id: 999_999 } } })).catch((e: unknown) => e);
    assert.ok(missing instanceof HopperProblem);
    assert.equal(missing.status, 404);
    assert.match(missing.type, /problems\/not_found$/);
    const invalid = await unwrap(
      hopper.api.POST('/v3/users/{user_id}/contacts', { params: { path: { user_id: t.adminId } }, body: { email: 'not-an-email' } }),
    ).catch((e: unknown) => e);
    assert.ok(invalid instanceof HopperProblem);
    assert.deepEqual(Object.keys(invalid.errors ?? {}), ['email']);
  });

  /**
   * A server in front of Hopper that misbehaves on the first request: answers 429, drops the
   * connection before Hopper sees the request, or forwards it and drops the connection before
   * the answer (Hopper did the work; the client cannot know).
   */
  async function flaky(
    first: 'rate-limited' | 'dropped' | 'answer-lost',
  ): Promise<{ server: Server; url: string; keys: (string | undefined)[] }> {
    const keys: (string | undefined)[] = [];
    const target = new URL(url);
    const server = createServer(async (req: IncomingMessage, res) => {
      keys.push(req.headers['idempotency-key'] as string | undefined);
      if (keys.length === 1 && first === 'rate-limited') {
        res.writeHead(429, { 'retry-after': '1', 'content-type': 'application/problem+json' });
        return res.end(JSON.stringify({ type: 'x', title: 'Too many', status: 429, detail: 'slow down', message: 'slow down' }));
      }
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      if (keys.length === 1 && first === 'dropped') return req.socket.destroy();
      const headers = { ...req.headers } as Record<string, string>;
      delete headers.host;
      const answer = await fetch(`${target.origin}${req.url}`, {
        method: req.method,
        headers,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      });
      const body = Buffer.from(await answer.arrayBuffer());
      if (keys.length === 1 && first === 'answer-lost') return req.socket.destroy();
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
      res.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v3`, keys };
  }

  test('a 429 is retried after Retry-After, with the same Idempotency-Key', async () => {
    const { server, url: flakyUrl, keys } = await flaky('rate-limited');
    const hopper = createHopper({ url: flakyUrl, key: t.adminKey });
    const started = Date.now();
    const tag = await unwrap(
      hopper.api.POST('/v3/users/{user_id}/tags', { params: { path: { user_id: t.adminId } }, body: { name: 'Retried' } }),
    );
    assert.equal(tag.name, 'Retried');
    assert.ok(Date.now() - started >= 900, 'waited as Retry-After said');
    assert.equal(keys.length, 2);
    assert.ok(keys[0] && keys[0] === keys[1], 'one Idempotency-Key for both attempts');
    server.close();
  });

  test('a POST whose connection drops is sent again with the same Idempotency-Key', async () => {
    const { server, url: flakyUrl, keys } = await flaky('dropped');
    const hopper = createHopper({ url: flakyUrl, key: t.adminKey, backoffMs: 10 });
    const tag = await unwrap(
      hopper.api.POST('/v3/users/{user_id}/tags', { params: { path: { user_id: t.adminId } }, body: { name: 'Dropped once' } }),
    );
    assert.equal(tag.name, 'Dropped once');
    assert.equal(keys.length, 2);
    assert.ok(keys[0] && keys[0] === keys[1]);
    server.close();
  });

  test('a POST whose answer is lost is sent again with its Idempotency-Key: one drop is created', async () => {
    const media = await upload(t.app, t.adminKey, t.adminId, 'open-house.wav', wavFile(6));
    const { server, url: flakyUrl, keys } = await flaky('answer-lost');
    const hopper = createHopper({ url: flakyUrl, key: t.adminKey, backoffMs: 10 });
    const drop = await unwrap(
      hopper.api.POST('/v3/users/{user_id}/voicemail_drops', {
        params: { path: { user_id: t.adminId } },
        body: { provider: 'Sandbox', media_id: media.id, callback_number: '7272329117', name: 'Sent once' },
      }),
    );
    assert.equal(drop.name, 'Sent once');
    assert.equal(keys.length, 2, 'the first answer was lost, so the client asked again');
    assert.ok(keys[0] && keys[0] === keys[1]);
    const drops = await unwrap(
      hopper.api.GET('/v3/users/{user_id}/voicemail_drops', { params: { path: { user_id: t.adminId }, query: { name: ['Sent once'] } } }),
    );
    assert.deepEqual(
      drops.data.map((d) => d.id),
      [drop.id],
      'Hopper answered the retry with the drop it had created',
    );
    server.close();
  });

  test('gives up after the attempts allowed and returns the last answer', async () => {
    const hopper = createHopper({ url: 'http://127.0.0.1:9/v3', key: t.adminKey, attempts: 2, backoffMs: 1 });
    await assert.rejects(unwrap(hopper.api.GET('/v3/users')));
  });
});
