import assert from 'node:assert/strict';
import { request } from 'node:https';
import { test } from 'node:test';
import { createUser } from '../support/factories.ts';
import { startTestApp } from '../support/test-app.ts';
import { assertClean, openBrowser, saveScreenshot, signIn, skipBrowser, testCertificate } from './support/browser.ts';
import { setPassword } from './web-client.ts';

const PASSWORD = 'browser test passphrase';

/** A GET over real HTTPS that trusts exactly the test's certificate; resolves to the status. */
function apiStatus(url: string, key: string, ca: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers: { authorization: `Bearer ${key}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

test('in a real browser over HTTPS: sign in, generate a key, use it, revoke it', {
  timeout: 120_000,
  skip: skipBrowser,
}, async () => {
  const tls = await testCertificate();
  const t = await startTestApp({ https: { key: tls.key, cert: tls.cert } });
  const run = await openBrowser(t, async () => {
    await t.close();
    await tls.remove();
  });
  try {
    const { base } = run;
    const user = await createUser(t, 'User', null, { first_name: 'Dana', last_name: 'Rivera' });
    await setPassword(t, user.id, PASSWORD);
    assert.equal(await apiStatus(`${base}/v3/users/${user.id}`, user.key, tls.cert), 200, 'so the listing has a last-used time');

    await run.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    const page = await run.newPage();
    await signIn(page, base, user.email, PASSWORD, '/account/settings');

    await page.getByRole('link', { name: 'Integrations' }).click();
    await page.waitForURL(`${base}/account/settings/integrations`);
    await page.getByLabel('Key name').fill('Browser key');
    await page.getByRole('button', { name: 'Generate key' }).click();
    const key = await page.getByLabel('API key').inputValue();
    assert.match(key, /^hop_[0-9A-Za-z]{46}$/);
    await page.getByText('it will not be shown again').waitFor();

    // The copy button exists only because copy.js ran under the strict CSP.
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByText('Copied to the clipboard.').waitFor();
    assert.equal(await page.evaluate('navigator.clipboard.readText()'), key);
    await saveScreenshot(page, 'integrations');

    assert.equal(await apiStatus(`${base}/v3/users/${user.id}`, key, tls.cert), 200);
    assert.equal(await apiStatus(`${base}/v3/users/${user.id}/api_keys`, key, tls.cert), 200);

    // Revoke with the keyboard only: the confirmation is a <details> that needs no script.
    const row = page.getByRole('row').filter({ hasText: 'Browser key' });
    await row.getByText('Revoke…').focus();
    await page.keyboard.press('Enter');
    await page.keyboard.press('Tab');
    assert.equal(await page.locator(':focus').textContent(), 'Revoke “Browser key”');
    await page.keyboard.press('Enter');
    await page.getByText('The key was revoked.').waitFor();
    assert.equal(await page.getByRole('row').filter({ hasText: 'Browser key' }).count(), 0);

    assert.equal(await apiStatus(`${base}/v3/users/${user.id}`, key, tls.cert), 401);
    assert.equal(await apiStatus(`${base}/v3/users/${user.id}/api_keys`, key, tls.cert), 401);

    // Nothing on the pages is blocked by their CSP (a blocked script or style is a console error).
    assertClean(run);

    await page.goto(`${base}/account/settings`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${base}/login`);
  } finally {
    await run.close();
  }
});
