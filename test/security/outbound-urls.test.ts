import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * Finding: media from a URL accepted `https://user:pw@host/…` (webhook endpoints refused it).
 * Both now pass through one guard (src/net/address-guard.ts): no credentials, no internal
 * address, checked again on every redirect.
 */
describe('URLs Hopper connects to', () => {
  let t: TestApp;
  let remote: Server;
  let base: string;
  let hits = 0;
  before(async () => {
    remote = createServer((request, response) => {
      hits++;
      if (request.url === '/to-credentials')
        response.writeHead(302, { location: `http://user:secret@127.0.0.1:${(remote.address() as AddressInfo).port}/x.mp3` }).end();
      else response.writeHead(404).end();
    });
    remote.listen(0, '127.0.0.1');
    await once(remote, 'listening');
    base = `http://127.0.0.1:${(remote.address() as AddressInfo).port}`;
    // Private addresses allowed, so the local stand-in can be reached: the credentials are what is refused.
    t = await startTestApp({ env: { MEDIA_FETCH_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true' } });
  });
  after(async () => {
    await t.close();
    remote.close();
  });

  test('media refuses a URL with a user name or password, before connecting, and on a redirect', async () => {
    const user = await createUser(t, 'User');
    const api = asKey(t.app, user.key);
    for (const url of ['https://user:pw@example.com/a.mp3', `${base.replace('//', '//user@')}/a.mp3`]) {
      const reply = await api.post(`/v3/users/${user.id}/media`, { full_url: url });
      assertProblem(reply, 400, 'validation');
      assert.match(reply.body.errors.full_url[0], /user name or password/, url);
    }
    assert.equal(hits, 0, 'nothing was fetched');
    const redirected = await api.post(`/v3/users/${user.id}/media`, { full_url: `${base}/to-credentials` });
    assertProblem(redirected, 400, 'validation');
    assert.match(redirected.body.errors.full_url[0], /user name or password/);
    assert.equal(hits, 1, 'the redirect was not followed');
  });

  test('webhook endpoints refuse the same URL, with the same words', async () => {
    const user = await createUser(t, 'User');
    const reply = await asKey(t.app, user.key).post(`/v3/users/${user.id}/webhooks`, {
      url: 'https://user:pw@example.com/hook',
      events: ['contact.created'],
    });
    assertProblem(reply, 400, 'validation');
    assert.match(reply.body.errors?.url?.[0], /user name or password/, reply.raw);
  });
});
