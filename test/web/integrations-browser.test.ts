import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { type BrowserContext, chromium } from 'playwright-core';
import { loadConfig } from '../../src/config.ts';
import { loadTls } from '../../src/tls.ts';
import { createUser } from '../support/factories.ts';
import { startTestApp } from '../support/test-app.ts';
import { tools } from '../support/tools.ts';
import { setPassword } from './web-client.ts';

const PASSWORD = 'browser test passphrase';
const ROOT = join(import.meta.dirname, '..', '..');
// The committed README screenshot is refreshed only on request, so a test run leaves the tree clean.
const UPDATE_DOCS_SCREENSHOT = process.env.UPDATE_DOCS_SCREENSHOT === '1';

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
  skip: tools.chromium.skip,
}, async () => {
  const scratch = await mkdtemp(join(tmpdir(), 'hopper-browser-'));
  const tls = await loadTls(loadConfig({ DATA_DIR: join(scratch, 'tls-data') }));
  const t = await startTestApp({ https: { key: tls.key, cert: tls.cert } });
  let context: BrowserContext | undefined;
  try {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `https://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    const user = await createUser(t, 'User', null, { first_name: 'Dana', last_name: 'Rivera' });
    await setPassword(t, user.id, PASSWORD);
    assert.equal(await apiStatus(`${base}/v3/users/${user.id}`, user.key, tls.cert), 200, 'so the listing has a last-used time');

    context = await chromium.launchPersistentContext(join(scratch, 'profile'), {
      executablePath: tools.chromium.path,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      ignoreHTTPSErrors: true,
      viewport: { width: 1100, height: 900 },
    });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    const page = context.pages()[0] ?? (await context.newPage());
    const cspViolations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) cspViolations.push(message.text());
    });

    await page.goto(`${base}/login?next=%2Faccount%2Fsettings`);
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByLabel('Password').press('Enter');
    await page.waitForURL(`${base}/account/settings`);

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

    await mkdir(join(ROOT, 'artifacts'), { recursive: true });
    const screenshot = join(ROOT, 'artifacts', 'integrations.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    const docsCopy = join(ROOT, 'docs', 'integrations.png');
    if (UPDATE_DOCS_SCREENSHOT || !existsSync(docsCopy)) await copyFile(screenshot, docsCopy);

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

    assert.deepEqual(cspViolations, [], 'nothing on the pages is blocked by their CSP');

    await page.goto(`${base}/account/settings`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${base}/login`);
  } finally {
    await context?.close();
    await t.close();
    await rm(scratch, { recursive: true, force: true });
  }
});
