import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { assertProblem, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { alertText, browser, setPassword } from './web-client.ts';

const PASSWORD = 'integrations passphrase';
const INTEGRATIONS = '/account/settings/integrations';

/** The key shown once after generating, read from its read-only field. */
function shownKey(html: string): string | undefined {
  return /id="new-key"[^>]*value="(hop_[0-9A-Za-z]+)"/.exec(html)?.[1];
}

function revokeUrl(html: string, name: string): string {
  const row = html.split('<tr>').find((r) => r.includes(`<td>${name}</td>`));
  const action = row && /action="([^"]+\/revoke)"/.exec(row)?.[1];
  assert.ok(action, `no revoke form for ${name}`);
  return action;
}

describe('account settings: Integrations', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  async function signedIn(role: 'User' | 'Team Administrator' = 'User', teamId: number | null = null) {
    const user = await createUser(t, role, teamId);
    await setPassword(t, user.id, PASSWORD);
    const b = browser(t.app);
    assert.equal((await b.signIn(user.email, PASSWORD)).status, 303);
    return { user, b };
  }

  test('lists the live keys by name, prefix, created and last used, with tabs for Profile and Integrations', async () => {
    const { user, b } = await signedIn();
    assert.equal((await asKey(t.app, user.key).get(`/v3/users/${user.id}`)).status, 200, 'the key gets a last-used time');
    const page = await b.get(INTEGRATIONS);
    assert.equal(page.status, 200);
    assert.match(page.html, /<a href="\/account\/settings">Profile<\/a>/);
    assert.match(page.html, /<a href="\/account\/settings\/integrations" aria-current="page">Integrations<\/a>/);
    assert.match(page.html, /<h2 id="api-heading">API<\/h2>/);
    assert.match(page.html, new RegExp(`<td>test</td>\\s*<td><code>${user.key.slice(0, 10)}…</code></td>`));
    assert.doesNotMatch(page.html, new RegExp(user.key), 'the full key is never listed');
    assert.match(
      page.html,
      /<time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ">\w{3} \d+, \d{4}, \d+:\d\d [AP]M UTC<\/time><\/td>\s*<td><time/,
    );
    assert.equal(page.headers['cache-control'], 'no-store');
  });

  test('generating shows the full key once; it works on the API until revoked from the page', async () => {
    const { user, b } = await signedIn();
    await b.get(INTEGRATIONS);
    const posted = await b.post(`${INTEGRATIONS}/api-keys`, { name: 'CRM sync' });
    assert.equal(posted.status, 303, 'answered with a redirect, so a reload does not post again');
    assert.equal(posted.location, INTEGRATIONS);
    const generated = await b.get(INTEGRATIONS);
    assert.equal(generated.status, 200);
    const key = shownKey(generated.html);
    assert.ok(key, 'the new key is on the page');
    assert.match(generated.html, /will not be shown again/);
    assert.match(generated.html, /<button type="button" class="button secondary" data-copy="new-key" hidden>Copy<\/button>/);
    assert.equal(generated.headers['cache-control'], 'no-store');

    const api = asKey(t.app, key);
    assert.equal((await api.get(`/v3/users/${user.id}`)).status, 200);
    assert.equal((await api.get(`/v3/users/${user.id}/api_keys`)).status, 200);

    const again = await b.get(INTEGRATIONS);
    assert.equal(shownKey(again.html), undefined, 'a reload does not show it again');
    assert.equal(again.html.includes(key), false);

    const revoked = await b.post(revokeUrl(again.html, 'CRM sync'));
    assert.equal(revoked.status, 303);
    const after = await b.get(revoked.location as string);
    assert.match(alertText(after.html) ?? '', /The key was revoked/);
    assert.doesNotMatch(after.html, /<td>CRM sync<\/td>/);
    assertProblem(await api.get(`/v3/users/${user.id}`), 401, 'unauthorized');
  });

  test('a key needs a name; the form says so and keeps the page', async () => {
    const { b } = await signedIn();
    await b.get(INTEGRATIONS);
    const blank = await b.post(`${INTEGRATIONS}/api-keys`, { name: '   ' });
    assert.equal(blank.status, 422);
    assert.match(blank.html, /id="key-name-error" class="field-error">Give the key a name\./);
    assert.match(blank.html, /aria-invalid="true"/);
    assert.equal(shownKey(blank.html), undefined);
  });

  test('a cancelled account sees when its grace period ends, cannot generate keys, and can still revoke', async () => {
    const { user, b } = await signedIn();
    assert.equal((await asKey(t.app, t.adminKey).post(`/v3/users/${user.id}/cancel`)).status, 200);
    const page = await b.get(INTEGRATIONS);
    assert.match(
      page.html,
      /Your account has been cancelled\.<\/strong>\s*Until \w{3} \d+, \d{4}, \d+:\d\d [AP]M UTC you can still sign in/,
    );
    assert.doesNotMatch(page.html, /action="\/account\/settings\/integrations\/api-keys"/, 'no generate form');
    assert.match((await b.get('/account/settings')).html, /Your account has been cancelled/, 'the banner is on every tab');

    const refused = await b.post(`${INTEGRATIONS}/api-keys`, { name: 'sneaky' });
    assert.equal(refused.status, 403);
    await b.get(INTEGRATIONS);
    assert.equal((await b.post(revokeUrl(page.html, 'test'))).status, 303);
    assertProblem(await asKey(t.app, user.key).get(`/v3/users/${user.id}`), 401);
  });

  test('a Team Administrator sees and revokes only their own keys here', async () => {
    const team = await createTeam(t);
    const teammate = await createUser(t, 'User', team);
    const { user: teamAdmin, b } = await signedIn('Team Administrator', team);
    const page = await b.get(INTEGRATIONS);
    assert.match(page.html, new RegExp(teamAdmin.key.slice(0, 10)));
    assert.doesNotMatch(page.html, new RegExp(teammate.key.slice(0, 10)));
    assert.equal((page.html.match(/<tr>/g) ?? []).length, 2, 'a header row and one key');

    const teammateKeys = await asKey(t.app, teammate.key).get(`/v3/users/${teammate.id}/api_keys`);
    const forged = await b.post(`${INTEGRATIONS}/api-keys/${teammateKeys.body.data[0].id}/revoke`);
    assert.equal(forged.status, 404);
    assert.equal((await asKey(t.app, teammate.key).get(`/v3/users/${teammate.id}`)).status, 200, "the teammate's key still works");
  });

  test('the Profile tab shows the account', async () => {
    const { user, b } = await signedIn();
    const page = await b.get('/account/settings');
    assert.match(page.html, /<a href="\/account\/settings" aria-current="page">Profile<\/a>/);
    assert.match(page.html, new RegExp(`<dd>${user.email}</dd>`));
  });
});
