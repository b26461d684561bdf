import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { PROBLEMS } from '../../src/http/problems.ts';
import { asKey } from '../support/client.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** `/` is a landing page and every problem's `type` URL answers with a page explaining it. */
describe('landing page and problem pages', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('/ links the reference, the sign-in page and the health probe, under the strict CSP', async () => {
    const reply = await asKey(t.app, undefined).get('/');
    assert.equal(reply.status, 200);
    assert.match(String(reply.headers['content-type']), /text\/html/);
    for (const href of ['/docs', '/login', '/health']) assert.match(reply.raw, new RegExp(`href="${href}"`));
    assert.match(String(reply.headers['content-security-policy']), /default-src 'none'/);
  });

  test("a problem's type URL resolves to a page explaining it; every problem has one", async () => {
    const problem = await asKey(t.app, t.adminKey).get('/v3/contacts/999999');
    const path = new URL(problem.body.type).pathname;
    const page = await asKey(t.app, undefined).get(path);
    assert.equal(page.status, 200);
    assert.match(page.raw, /Not found \(404\)/);
    for (const code of Object.keys(PROBLEMS)) assert.equal((await asKey(t.app, undefined).get(`/problems/${code}`)).status, 200, code);
    assert.equal((await asKey(t.app, undefined).get('/problems/no_such_thing')).status, 404);
    assert.equal((await asKey(t.app, undefined).get('/problems/constructor')).status, 404);
  });
});
