import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { browser, setPassword } from './web-client.ts';

const PASSWORD = 'profile passphrase';

/** The Profile tab's sender form: the same fields as `PUT /v3/users/{id}`, for the signed-in user only. */
describe('account settings: Profile, email sender', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('shows the defaults, saves sender name, email and postal address, and empty fields go back to the defaults', async () => {
    const user = await createUser(t, 'User');
    await setPassword(t, user.id, PASSWORD);
    const b = browser(t.app);
    assert.equal((await b.signIn(user.email, PASSWORD)).status, 303);
    const page = await b.get('/account/settings');
    assert.equal(page.status, 200);
    assert.match(page.html, new RegExp(`id="sender_email"[^>]*value="${user.email}"`));
    assert.match(page.html, /id="sender_name"[^>]*value="Test User"/);

    const saved = await b.post('/account/settings/sender', {
      sender_name: 'Jane <b>Agent</b>',
      sender_email: 'jane@agents.example',
      postal_address: '12 Harbor Road\r\nTampa, FL 33602',
    });
    assert.equal(saved.status, 303, saved.html);
    const api = asKey(t.app, user.key);
    const read = (await api.get(`/v3/users/${user.id}`)).body;
    assert.equal(read.sender_name, 'Jane <b>Agent</b>');
    assert.equal(read.sender_email, 'jane@agents.example');
    assert.equal(read.postal_address, '12 Harbor Road\r\nTampa, FL 33602');
    const shown = await b.get('/account/settings?saved');
    assert.match(shown.html, /value="Jane &lt;b&gt;Agent&lt;\/b&gt;"/, 'escaped, never markup');

    const bad = await b.post('/account/settings/sender', { sender_name: 'x', sender_email: 'not an address', postal_address: '' });
    assert.equal(bad.status, 422);
    // The form kit: a summary linking to the field, the error in place, what was typed kept.
    assert.match(bad.html, /class="error-summary"[\s\S]*<a href="#sender_email">Sender email must be an email address\.<\/a>/);
    assert.match(
      bad.html,
      /id="sender_email-error"[^>]*><span class="visually-hidden">Error: <\/span>Sender email must be an email address\./,
    );
    assert.match(bad.html, /id="sender_email"[^>]*value="not an address"[^>]*aria-describedby="sender_email-error" aria-invalid="true"/);
    assert.match(bad.html, /id="sender_name"[^>]*value="x"/);
    assert.equal((await api.get(`/v3/users/${user.id}`)).body.sender_email, 'jane@agents.example', 'nothing saved');

    await b.get('/account/settings');
    assert.equal((await b.post('/account/settings/sender', { sender_name: '', sender_email: '', postal_address: '' })).status, 303);
    const reset = (await api.get(`/v3/users/${user.id}`)).body;
    assert.deepEqual([reset.sender_name, reset.sender_email, reset.postal_address], ['Test User', user.email, null]);
  });

  test('without a session or a CSRF token nothing changes', async () => {
    const user = await createUser(t, 'User');
    const anonymous = browser(t.app);
    const refused = await anonymous.post('/account/settings/sender', { sender_name: 'Evil', sender_email: '', postal_address: '' });
    assert.notEqual(refused.status, 303);
    await setPassword(t, user.id, PASSWORD);
    const b = browser(t.app);
    await b.signIn(user.email, PASSWORD);
    const forged = await b.post('/account/settings/sender', { _csrf: '', sender_name: 'Evil', sender_email: '', postal_address: '' });
    assert.equal(forged.status, 403);
    assert.equal((await asKey(t.app, user.key).get(`/v3/users/${user.id}`)).body.sender_name, 'Test User');
  });
});
