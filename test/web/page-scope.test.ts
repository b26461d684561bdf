import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DOCS_CSP } from '../../src/http/openapi.ts';
import { asKey } from '../support/client.ts';
import { assertProblem } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** The web pages' plugins (form bodies, cookies, helmet) must stay inside the pages' scope. */
describe('web pages beside the API', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('pages carry a strict Content-Security-Policy and the other security headers', async () => {
    const page = await asKey(t.app, undefined).get('/login');
    assert.equal(page.status, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    const csp = String(page.headers['content-security-policy']);
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /style-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(page.headers['x-content-type-options'], 'nosniff');
    assert.ok(page.headers['strict-transport-security']);
    assert.equal(page.headers['referrer-policy'], 'no-referrer');
    assert.doesNotMatch(page.raw, /<script>|<style>|style="|onclick=/, 'no inline script or style for the CSP to block');
  });

  test('the stylesheet and the copy script are same-origin files', async () => {
    const css = await asKey(t.app, undefined).get('/static/app.css');
    assert.equal(css.status, 200);
    assert.match(String(css.headers['content-type']), /^text\/css/);
    assert.match(css.raw, /:focus-visible/);
    const js = await asKey(t.app, undefined).get('/static/copy.js');
    assert.equal(js.status, 200);
    assert.match(String(js.headers['content-type']), /^text\/javascript/);
    assert.match(js.raw, /navigator\.clipboard/);
  });

  test('the JSON API keeps its headers and still refuses form bodies with 415', async () => {
    const admin = asKey(t.app, t.adminKey);
    const api = await admin.get('/v3/users');
    assert.equal(api.status, 200);
    assert.equal(api.headers['content-security-policy'], undefined);
    assertProblem(
      await admin.post('/v3/teams', 'name=x', { 'content-type': 'application/x-www-form-urlencoded' }),
      415,
      'unsupported_media_type',
    );
  });

  test('/docs still renders under its own CSP, and the pages are not in the OpenAPI document', async () => {
    const docs = await asKey(t.app, undefined).get('/docs/');
    assert.equal(docs.status, 200);
    assert.match(docs.raw, /<redoc spec-url="\/v3\/openapi.json"/);
    assert.equal(docs.headers['content-security-policy'], DOCS_CSP, "its own CSP, not the pages'");
    const doc = await asKey(t.app, undefined).get('/v3/openapi.json');
    const paths = Object.keys(doc.body.paths);
    assert.ok(paths.length > 0);
    assert.deepEqual(
      paths.filter((p) => /login|logout|account|static/.test(p)),
      [],
    );
  });

  test('pages do not take a Bearer key instead of a session', async () => {
    const page = await asKey(t.app, t.adminKey).get('/account/settings');
    assert.equal(page.status, 303);
    assert.equal(page.headers.location, '/login');
  });
});
