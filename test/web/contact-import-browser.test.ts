import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { asKey } from '../support/client.ts';
import { createTeam, createUser } from '../support/factories.ts';
import {
  assertAccessible,
  assertClean,
  assertFitsWidth,
  assertInert,
  HOSTILE,
  signIn,
  skipBrowser,
  startBrowserRun,
} from './support/browser.ts';
import { setPassword } from './web-client.ts';

const PASSWORD = 'contact import browser passphrase';
const ROOT = join(import.meta.dirname, '..', '..');
const FIXTURES = join(ROOT, 'test', 'fixtures', 'contacts');
const UPDATE_DOCS_SCREENSHOT = process.env.UPDATE_DOCS_SCREENSHOT === '1';

async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(join(ROOT, 'artifacts'), { recursive: true });
  const path = join(ROOT, 'artifacts', `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  const docsCopy = join(ROOT, 'docs', `${name}.png`);
  if (UPDATE_DOCS_SCREENSHOT || !existsSync(docsCopy)) await copyFile(path, docsCopy);
}

/** The counts of a finished import's page, by name. */
async function counts(page: Page): Promise<Record<string, number>> {
  const pairs = await page
    .locator('dd[data-count]')
    .evaluateAll((dds) => dds.map((dd) => [dd.getAttribute('data-count'), dd.textContent ?? '']) as [string, string][]);
  return Object.fromEntries(pairs.map(([name, value]) => [name, Number(value.replaceAll(',', ''))]));
}

test('in a real browser: the Google export uploaded, previewed, imported, its refused row shown with why, its contacts found by the API', {
  timeout: 300_000,
  skip: skipBrowser,
}, async () => {
  const run = await startBrowserRun();
  try {
    const { t, base } = run;
    const teamId = await createTeam(t);
    const agent = await createUser(t, 'User', teamId);
    const stranger = await createUser(t, 'User', await createTeam(t));
    for (const who of [agent, stranger]) await setPassword(t, who.id, PASSWORD);
    const api = asKey(t.app, agent.key);

    const page = await run.newPage();
    await signIn(page, base, agent.email, PASSWORD, '/contacts');
    await page.getByRole('link', { name: 'Import contacts' }).click();
    await page.waitForURL(`${base}/contacts/import`);
    await assertAccessible(page, '/contacts/import');
    await page.getByLabel('CSV file').setInputFiles(join(FIXTURES, 'google-contacts.csv'));
    await page.getByRole('button', { name: 'Upload and preview' }).click();
    await page.waitForURL(/\/contacts\/import\/\d+$/);
    const importPath = new URL(page.url()).pathname;
    // The mapping as the API's import reads Google's columns; nothing is changed.
    assert.equal(await page.getByLabel('E-mail 1 - Value').inputValue(), 'email');
    assert.equal(await page.getByLabel('Phone 1 - Value').inputValue(), 'phone');
    assert.equal(await page.getByLabel('Labels').inputValue(), 'tags');
    assert.equal(await page.getByLabel('Organization Name').inputValue(), 'ignore');
    await page
      .getByRole('table', { name: 'The first rows of the file as contacts' })
      .getByRole('cell', { name: 'maria.gonzalez@gmail.example' })
      .waitFor();
    await assertAccessible(page, 'the preview');
    await assertFitsWidth(page);
    await screenshot(page, 'contact-import');
    await page.getByRole('button', { name: 'Import 4 rows' }).click();
    await page.getByRole('heading', { name: 'Imported', exact: true }).waitFor({ timeout: 30_000 });
    assert.deepEqual(await counts(page), { created: 3, updated: 0, refused: 1 });
    const refused = page.locator('tr[data-refused-line="6"]');
    assert.deepEqual(await refused.locator('th, td').allTextContents(), [
      '6',
      'Email',
      'not-an-address',
      'Email must be a valid email address.',
    ]);
    await assertAccessible(page, 'the finished import');

    // The API finds what the page imported, tags and all.
    for (const [email, tags] of [
      ['maria.gonzalez@gmail.example', ['Buyers', 'Open House']],
      ['tom@bayhomes.example', ['Sellers']],
    ] as const) {
      const found = await api.get(`/v3/users/${agent.id}/contacts?email=${email}`);
      assert.equal(found.body.data.length, 1, email);
      assert.deepEqual(found.body.data[0].tags.sort(), tags);
    }
    const priya = await api.get(`/v3/users/${agent.id}/contacts?first_name=Priya`);
    assert.equal(priya.body.data[0]?.phone, '7275550123');

    // Without JavaScript at 375 px: a refused upload, then a file with hostile cells remapped by hand, progress by meta refresh.
    const plain = await run.newPage({ javaScript: false, width: 375 });
    await signIn(plain, base, agent.email, PASSWORD, '/contacts/import');
    await plain.getByRole('button', { name: 'Upload and preview' }).click();
    await plain.getByRole('alert').getByRole('link', { name: 'Select a CSV file.' }).waitFor();
    await assertFitsWidth(plain);
    const hostileName = `${HOSTILE.script}${HOSTILE.onerror}`;
    const csv = `Vorname,E-Mail-Adresse,Notiz\n"${hostileName.replaceAll('"', '""')}",hostile@example.com,"${HOSTILE.css.replaceAll('"', '""')}"\n`;
    await plain.getByLabel('CSV file').setInputFiles({ name: 'kontakte.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
    await plain.getByRole('button', { name: 'Upload and preview' }).click();
    await plain.waitForURL(/\/contacts\/import\/\d+$/);
    await plain
      .getByRole('alert')
      .getByRole('link', { name: /^The columns cannot be imported as mapped: none of its columns/ })
      .waitFor();
    await assertInert(plain);
    await assertFitsWidth(plain);
    await plain.getByLabel('Vorname').selectOption('first_name');
    await plain.getByLabel('E-Mail-Adresse').selectOption('email');
    await plain.getByRole('button', { name: 'Update preview' }).click();
    await plain
      .getByRole('table', { name: 'The first rows of the file as contacts' })
      .getByRole('cell', { name: 'hostile@example.com' })
      .waitFor();
    assert.equal(await plain.getByLabel('Notiz').inputValue(), 'ignore');
    await plain.getByRole('button', { name: 'Import 1 row' }).click();
    await plain.getByRole('heading', { name: 'Imported', exact: true }).waitFor({ timeout: 30_000 });
    assert.deepEqual(await counts(plain), { created: 1, updated: 0, refused: 0 });
    await assertInert(plain);
    await assertFitsWidth(plain);
    const [hostile] = (await api.get(`/v3/users/${agent.id}/contacts?email=hostile@example.com`)).body.data;
    assert.equal(hostile.first_name, hostileName);

    // Another team's user is refused the import's page.
    const other = await run.newPage({ javaScript: true, width: 1100 });
    await signIn(other, base, stranger.email, PASSWORD, '/contacts');
    const refusedPage = await other.goto(`${base}${importPath}`);
    assert.equal(refusedPage?.status(), 403);
    assertClean(run);
    assert.ok((await readFile(join(ROOT, 'artifacts', 'contact-import.png'))).length > 0);
  } finally {
    await run.close();
  }
});
