import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTeam, createUser } from '../support/factories.ts';
import {
  assertAccessible,
  assertClean,
  assertFitsWidth,
  assertInert,
  HOSTILE_TEXT,
  signedInPage,
  signIn,
  skipBrowser,
  startBrowserRun,
} from './support/browser.ts';
import { setPassword } from './web-client.ts';

const PASSWORD = 'layout browser passphrase';

test('in a real browser: the layout at 375 px, the switcher, and the form kit with JavaScript off', {
  timeout: 60_000,
  skip: skipBrowser,
}, async () => {
  const run = await startBrowserRun();
  try {
    const { t, base } = run;
    const teamId = await createTeam(t);
    const lead = await createUser(t, 'Team Administrator', teamId, { first_name: 'Tess' });
    await createUser(t, 'User', teamId, { first_name: HOSTILE_TEXT.slice(0, 100), last_name: 'Agent' });
    await setPassword(t, lead.id, PASSWORD);

    // A phone's width, without script: every form still works.
    const page = await signedInPage(run, { email: lead.email, password: PASSWORD }, '/account/settings');
    await assertFitsWidth(page);

    // The form kit: the summary links to the field, the error stands beside it, the typed value stays.
    await page.getByLabel('Sender email').fill('not an address');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    const summary = page.getByRole('alert').filter({ hasText: 'There is a problem' });
    await summary.getByRole('link', { name: 'Sender email must be an email address.' }).click();
    assert.equal(await page.evaluate('document.activeElement.id'), 'sender_email', 'the link takes the keyboard to the field');
    assert.equal(await page.getByLabel('Sender email').inputValue(), 'not an address');

    // The switcher: act for the teammate whose name is hostile; it shows as text.
    await page.goto(`${base}/account/settings`);
    await page.getByLabel('Acting for').selectOption({ index: 1 });
    await page.getByRole('button', { name: 'Switch' }).click();
    await page.getByText('You are acting for').waitFor();
    assert.match((await page.getByRole('status').first().textContent()) ?? '', /<script>alert/);
    await assertInert(page);

    // axe-core runs as script: the same pages at the same width with it on.
    const checked = await run.newPage({ width: 375 });
    await signIn(checked, base, lead.email, PASSWORD, '/account/settings');
    await assertAccessible(checked, 'the profile at 375 px');
    await checked.getByLabel('Sender email').fill('not an address');
    await checked.getByRole('button', { name: 'Save', exact: true }).click();
    await checked.getByText('There is a problem').waitFor();
    await assertAccessible(checked, 'the refused form');
    await checked.getByLabel('Acting for').selectOption({ index: 1 });
    await checked.getByRole('button', { name: 'Switch' }).click();
    await checked.getByText('You are acting for').waitFor();
    await assertInert(checked);
    await assertAccessible(checked, 'acting for a teammate');
    await assertFitsWidth(checked);
    assertClean(run);
  } finally {
    await run.close();
  }
});
