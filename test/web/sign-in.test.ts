import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { IDLE_TIMEOUT_MS, SESSION_COOKIE } from '../../src/web/sessions.ts';
import { SIGN_IN_FAILED } from '../../src/web/sign-in.ts';
import { MAX_PER_ACCOUNT, MAX_PER_ADDRESS, WINDOW_MS } from '../../src/web/sign-in-throttle.ts';
import { asKey } from '../support/client.ts';
import { createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { alertText, browser, setPassword } from './web-client.ts';

const PASSWORD = 'correct horse battery staple';

describe('web sign-in', () => {
  let t: TestApp;
  let offsetMs = 0;
  // Tests move time forward through the app's clock; each test signs in from its own address so
  // the per-address throttle of one test does not spill into another.
  let address = 0;
  const nextAddress = () => `192.0.2.${++address}`;

  before(async () => {
    t = await startTestApp({ clock: () => new Date(Date.now() + offsetMs), env: { GRACE_PERIOD: '2h' } });
  });
  after(() => t.close());

  async function userWithPassword(role: 'User' | 'Team Administrator' = 'User') {
    const user = await createUser(t, role);
    await setPassword(t, user.id, PASSWORD);
    return user;
  }

  test('the right email and password open a session: HttpOnly, Secure, SameSite=Lax cookie, then settings', async () => {
    const user = await userWithPassword();
    const b = browser(t.app, nextAddress());
    const signedIn = await b.signIn(user.email.toUpperCase(), PASSWORD);
    assert.equal(signedIn.status, 303);
    assert.equal(signedIn.location, '/', 'the dashboard');
    const cookie = [signedIn.headers['set-cookie']].flat().find((c) => String(c).startsWith(`${SESSION_COOKIE}=`));
    assert.match(String(cookie), /; HttpOnly/);
    assert.match(String(cookie), /; Secure/);
    assert.match(String(cookie), /; SameSite=Lax/);
    assert.match(String(cookie), /; Expires=/);
    const settings = await b.get('/account/settings');
    assert.equal(settings.status, 200);
    assert.match(settings.html, new RegExp(user.email));
  });

  test('a wrong password and an unknown email get the same generic message', async () => {
    const user = await userWithPassword();
    const wrong = await browser(t.app, nextAddress()).signIn(user.email, 'not the password at all');
    const unknown = await browser(t.app, nextAddress()).signIn('nobody-here@example.com', PASSWORD);
    const noPassword = await browser(t.app, nextAddress()).signIn((await createUser(t, 'User')).email, PASSWORD);
    for (const page of [wrong, unknown, noPassword]) {
      assert.equal(page.status, 422);
      assert.equal(alertText(page.html), SIGN_IN_FAILED);
      assert.equal(page.headers['set-cookie']?.toString().includes(SESSION_COOKIE), false);
    }
  });

  test('a sign-in POST without its CSRF token, or with a wrong one, is refused with 403', async () => {
    const user = await userWithPassword();
    const missing = browser(t.app, nextAddress());
    await missing.get('/login');
    assert.equal((await missing.post('/login', { email: user.email, password: PASSWORD, _csrf: '' })).status, 403);
    const wrong = browser(t.app, nextAddress());
    await wrong.get('/login');
    assert.equal((await wrong.post('/login', { email: user.email, password: PASSWORD, _csrf: 'x'.repeat(43) })).status, 403);
    // The token from the page but not the cookie that goes with it (a forged cross-site form).
    const noCookie = browser(t.app, nextAddress());
    await noCookie.get('/login');
    noCookie.jar.clear();
    assert.equal((await noCookie.post('/login', { email: user.email, password: PASSWORD })).status, 403);
  });

  test('signed-in forms need the session token: missing, wrong or another session’s token is 403', async () => {
    const user = await userWithPassword();
    const other = browser(t.app, nextAddress());
    await other.signIn(user.email, PASSWORD);
    const otherToken = /name="_csrf" value="([^"]+)"/.exec((await other.get('/account/settings/integrations')).html)?.[1] as string;

    const b = browser(t.app, nextAddress());
    await b.signIn(user.email, PASSWORD);
    await b.get('/account/settings/integrations');
    const form = '/account/settings/integrations/api-keys';
    assert.equal((await b.post(form, { name: 'forged', _csrf: '' })).status, 403);
    assert.equal((await b.post(form, { name: 'forged', _csrf: 'nope' })).status, 403);
    assert.equal((await b.post(form, { name: 'forged', _csrf: otherToken })).status, 403);
    assert.equal((await b.post('/logout', { _csrf: '' })).status, 403);
    const keys = await asKey(t.app, user.key).get(`/v3/users/${user.id}/api_keys?name=forged`);
    assert.equal(keys.body.meta.total, 0, 'no key was created by a refused form');
  });

  test('sign-out ends the session on the server, not only in the browser', async () => {
    const user = await userWithPassword();
    const b = browser(t.app, nextAddress());
    await b.signIn(user.email, PASSWORD);
    const stolen = b.jar.get(SESSION_COOKIE) as string;
    await b.get('/account/settings');
    const out = await b.post('/logout');
    assert.equal(out.status, 303);
    assert.equal(out.location, '/login');
    assert.equal(b.jar.has(SESSION_COOKIE), false, 'the cookie is cleared');
    b.jar.set(SESSION_COOKIE, stolen);
    const again = await b.get('/account/settings');
    assert.equal(again.status, 303);
    assert.equal(again.location, '/login');
  });

  test('a session ends after an idle hour, and after its absolute lifetime however busy', async () => {
    const user = await userWithPassword();
    const idle = browser(t.app, nextAddress());
    await idle.signIn(user.email, PASSWORD);
    offsetMs += IDLE_TIMEOUT_MS - 60_000;
    assert.equal((await idle.get('/account/settings')).status, 200, 'still alive just before the idle limit');
    offsetMs += IDLE_TIMEOUT_MS + 1_000;
    assert.equal((await idle.get('/account/settings')).location, '/login');

    const busy = browser(t.app, nextAddress());
    await busy.signIn(user.email, PASSWORD);
    let pages = 0;
    for (let elapsed = 0; elapsed < 12 * 3_600_000; elapsed += 50 * 60_000) {
      assert.equal((await busy.get('/account/settings')).status, 200);
      offsetMs += 50 * 60_000;
      pages++;
    }
    assert.ok(pages > 10);
    assert.equal((await busy.get('/account/settings')).location, '/login', '12 hours after sign-in the session is over');
  });

  test('a new password set through the API signs the user out everywhere', async () => {
    const user = await userWithPassword();
    const b = browser(t.app, nextAddress());
    await b.signIn(user.email, PASSWORD);
    await setPassword(t, user.id, 'another long passphrase');
    assert.equal((await b.get('/account/settings')).location, '/login');
    assert.equal((await browser(t.app, nextAddress()).signIn(user.email, 'another long passphrase')).status, 303);
  });

  test('repeated failures for one account are refused with 429 and Retry-After, even with the right password', async () => {
    const user = await userWithPassword();
    for (let i = 0; i < MAX_PER_ACCOUNT; i++) {
      // Different addresses: the account counter alone must stop this.
      assert.equal((await browser(t.app, nextAddress()).signIn(user.email, `wrong password ${i}`)).status, 422);
    }
    const refused = await browser(t.app, nextAddress()).signIn(user.email, PASSWORD);
    assert.equal(refused.status, 429);
    const retryAfter = Number(refused.headers['retry-after']);
    assert.ok(retryAfter > 0 && retryAfter <= WINDOW_MS / 1000, `Retry-After ${retryAfter}`);
    assert.match(alertText(refused.html) ?? '', /Too many failed sign-ins/);

    offsetMs += retryAfter * 1000;
    assert.equal((await browser(t.app, nextAddress()).signIn(user.email, PASSWORD)).status, 303, 'allowed again once the window passed');
  });

  test('repeated failures from one address are refused for every account from there, not from elsewhere', async () => {
    const user = await userWithPassword();
    const address = nextAddress();
    for (let i = 0; i < MAX_PER_ADDRESS; i++) {
      assert.equal((await browser(t.app, address).signIn(`guess-${i}@example.com`, 'some wrong password')).status, 422);
    }
    const refused = await browser(t.app, address).signIn(user.email, PASSWORD);
    assert.equal(refused.status, 429);
    assert.ok(Number(refused.headers['retry-after']) > 0);
    assert.equal((await browser(t.app, nextAddress()).signIn(user.email, PASSWORD)).status, 303);
  });

  test('a cancelled account past its grace period cannot sign in, and its open sessions end', async () => {
    const user = await userWithPassword();
    const b = browser(t.app, nextAddress());
    await b.signIn(user.email, PASSWORD);
    assert.equal((await asKey(t.app, t.adminKey).post(`/v3/users/${user.id}/cancel`)).status, 200);
    assert.equal((await b.get('/account/settings')).status, 200, 'within the grace period the session lives on');

    offsetMs += 2 * 3_600_000 + 1_000;
    assert.equal((await b.get('/account/settings')).location, '/login');
    const refused = await browser(t.app, nextAddress()).signIn(user.email, PASSWORD);
    assert.equal(refused.status, 403);
    assert.match(alertText(refused.html) ?? '', /grace period ended .* can no longer sign in/);
  });

  test('pages need a session: without one they redirect to /login', async () => {
    for (const url of ['/account/settings', '/account/settings/integrations']) {
      const page = await browser(t.app, nextAddress()).get(url);
      assert.equal(page.status, 303);
      assert.equal(page.location, '/login');
    }
  });
});
