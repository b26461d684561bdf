import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import {
  assertAccessible,
  assertClean,
  assertFitsWidth,
  type BrowserRun,
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
});
