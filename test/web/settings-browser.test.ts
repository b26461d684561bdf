import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import {
  assertAccessible,
  assertClean,
  assertFitsWidth,
  type BrowserRun,
  signedInPage,
  signIn,
  skipBrowser,
  startBrowserRun,
} from './support/browser.ts';
import { setPassword } from './web-client.ts';

const PASSWORD = 'settings pages passphrase';

/** `/account/settings` and its tabs in Debian's chromium, checked against the API. */
describe('the account settings pages', { skip: skipBrowser }, () => {
  let run: BrowserRun;
  let agent: Actor;
  before(async () => {
    run = await startBrowserRun();
    agent = await createUser(run.t, 'User', await createTeam(run.t));
    await setPassword(run.t, agent.id, PASSWORD);
  });
  after(() => run?.close());

  test('a new API key is shown once, after a redirect: reloading the page makes no second key', { timeout: 120_000 }, async () => {
    const page = await run.newPage();
    await signIn(page, run.base, agent.email, PASSWORD, '/account/settings/integrations');
    const before = (await asKey(run.t.app, agent.key).get(`/v3/users/${agent.id}/api_keys`)).body.data.length;
    await page.getByLabel('Key name').fill('Reload key');
    await page.getByRole('button', { name: 'Generate key' }).click();
    const key = await page.getByLabel('API key').inputValue();
    assert.match(key, /^hop_[0-9A-Za-z]{46}$/);
    await assertAccessible(page);
    await assertFitsWidth(page);

    await page.reload();
    await page.getByRole('heading', { name: 'Your keys' }).waitFor();
    assert.equal(await page.getByLabel('API key').count(), 0, 'the key is not shown again');
    const keys = (await asKey(run.t.app, agent.key).get(`/v3/users/${agent.id}/api_keys`)).body.data;
    assert.equal(keys.length, before + 1, 'one key was made, not two');
    assert.equal(keys.filter((k: { name: string }) => k.name === 'Reload key').length, 1);
    assert.equal(page.url(), `${run.base}/account/settings/integrations`, 'the POST was answered with a redirect');
    const made = await asKey(run.t.app, key).get(`/v3/users/${agent.id}`);
    assert.equal(made.status, 200, 'the key shown is the one made');
    assertClean(run);
  });

  test('one changes their own password (the current one required) and time zone; the API then shows them', {
    timeout: 120_000,
  }, async () => {
    const user = await createUser(run.t, 'User', await createTeam(run.t));
    await setPassword(run.t, user.id, PASSWORD);
    const other = await run.newPage({ javaScript: false });
    await signIn(other, run.base, user.email, PASSWORD, '/account/settings');
    const page = await signedInPage(run, { email: user.email, password: PASSWORD }, '/account/settings');

    await page.getByLabel('Current password').fill('not the password at all');
    await page.getByLabel('New password').fill('short');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByRole('link', { name: 'Current password is not correct.' }).waitFor();
    await page.getByRole('link', { name: 'New password must be 12 to 1024 characters.' }).waitFor();
    assert.equal(await page.getByLabel('New password').getAttribute('aria-invalid'), 'true');
    assert.equal(await page.getByLabel('Current password').inputValue(), '', 'a password is never sent back');

    const next = 'a brand new passphrase';
    await page.getByLabel('Current password').fill(PASSWORD);
    await page.getByLabel('New password').fill(next);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('Your password was changed.').waitFor();
    assert.equal(page.url(), `${run.base}/account/settings?notice=password`);
    await assertFitsWidth(page);

    // The other browser was signed out; the old password no longer works, the new one does.
    await other.goto(`${run.base}/account/settings`);
    assert.match(other.url(), /\/login/);
    await other.getByLabel('Email').fill(user.email);
    await other.getByLabel('Password').fill(PASSWORD);
    await other.getByRole('button', { name: 'Sign in' }).click();
    await other.getByText('The email or password is incorrect.').waitFor();
    await signIn(other, run.base, user.email, next, '/account/settings');

    await page.getByRole('combobox', { name: 'Time zone' }).selectOption('Europe/Berlin');
    await page.getByRole('button', { name: 'Save time zone' }).click();
    await page.getByText('Your time zone was saved.').waitFor();
    assert.equal((await asKey(run.t.app, user.key).get(`/v3/users/${user.id}`)).body.time_zone, 'Europe/Berlin');
    assert.equal(await page.getByRole('combobox', { name: 'Time zone' }).inputValue(), 'Europe/Berlin');

    const withScript = await run.newPage({ width: 1100 });
    await signIn(withScript, run.base, user.email, next, '/account/settings');
    await assertAccessible(withScript);
    assertClean(run);
  });

  test('an invitation: who made the user makes a one-time link, the user sets their first password and signs in with it', {
    timeout: 120_000,
  }, async () => {
    const teamId = await createTeam(run.t);
    const lead = await createUser(run.t, 'Team Administrator', teamId);
    const stranger = await createUser(run.t, 'Team Administrator', await createTeam(run.t));
    const created = await asKey(run.t.app, lead.key).post('/v3/users', {
      first_name: 'New',
      last_name: 'Agent',
      email: `new-${agent.id}@example.com`,
      roles: ['User'],
      team_id: teamId,
    });
    assert.equal(created.status, 201, created.raw);
    const id = created.body.id as number;
    assert.equal((await asKey(run.t.app, stranger.key).post(`/v3/users/${id}/invitation`)).status, 403);
    assert.equal((await asKey(run.t.app, agent.key).post(`/v3/users/${id}/invitation`)).status, 403);
    const first = await asKey(run.t.app, lead.key).post(`/v3/users/${id}/invitation`);
    assert.equal(first.status, 201, first.raw);
    // The second from /users, where the Team Administrator sends it (JavaScript off, 375 px): shown once.
    await setPassword(run.t, lead.id, PASSWORD);
    const users = await signedInPage(run, { email: lead.email, password: PASSWORD }, '/');
    await users.getByRole('link', { name: 'Users', exact: true }).click();
    await users.getByRole('button', { name: 'Send invitation to New Agent' }).click();
    await users.waitForURL(`${run.base}/users`);
    const path = new URL(await users.getByLabel('Invitation link').inputValue()).pathname;
    assert.match(path, /^\/invitation\/[\w-]{43}$/);
    await assertFitsWidth(users);
    await users.reload();
    assert.equal(await users.getByLabel('Invitation link').count(), 0, 'the link is shown once');

    const page = await run.newPage({ javaScript: false, width: 375 });
    await page.goto(`${run.base}${new URL(first.body.url).pathname}`);
    await page.getByText('This invitation cannot be used').waitFor();

    await page.goto(`${run.base}${path}`);
    await page.getByText(`new-${agent.id}@example.com`).waitFor();
    await page.getByLabel('New password').fill('too short');
    await page.getByRole('button', { name: 'Set password' }).click();
    await page.getByRole('link', { name: 'New password must be 12 to 1024 characters.' }).waitFor();
    await assertFitsWidth(page);
    const chosen = 'my own first passphrase';
    await page.getByLabel('New password').fill(chosen);
    await page.getByRole('button', { name: 'Set password' }).click();
    await page.waitForURL(`${run.base}/login`);
    await signIn(page, run.base, `new-${agent.id}@example.com`, chosen, '/account/settings');
    await page.getByText('New Agent').first().waitFor();

    // Used once: the link is dead, and a user with a password gets no new one.
    await page.goto(`${run.base}${path}`);
    await page.getByText('This invitation cannot be used').waitFor();
    assert.equal((await asKey(run.t.app, lead.key).post(`/v3/users/${id}/invitation`)).status, 409);

    const withScript = await run.newPage({ width: 1100 });
    await signIn(withScript, run.base, lead.email, PASSWORD, '/users');
    await assertAccessible(withScript);
    const again = await asKey(run.t.app, run.t.adminKey).post(`/v3/users/${stranger.id}/invitation`);
    assert.equal(again.status, 201, again.raw);
    await withScript.goto(`${run.base}${new URL(again.body.url).pathname}`);
    await assertAccessible(withScript);
    assertClean(run);
  });
});
