import assert from 'node:assert/strict';
import { test } from 'node:test';
import { wavFile } from '../media/fixtures.ts';
import { asKey } from '../support/client.ts';
import { createTeam, createUser } from '../support/factories.ts';
import {
  assertAccessible,
  assertClean,
  assertFitsWidth,
  assertInert,
  HOSTILE,
  signedInPage,
  signIn,
  skipBrowser,
  startBrowserRun,
} from './support/browser.ts';
import { setPassword } from './web-client.ts';

const PASSWORD = 'compose drop passphrase';

test('in a real browser: /drops/new with an uploaded recording is found by the API; a refused upload stays with its player', {
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
    const tag = await api.post(`/v3/users/${agent.id}/tags`, { name: HOSTILE.script });
    assert.equal(tag.status, 201, tag.raw);

    const page = await run.newPage();
    await signIn(page, base, agent.email, PASSWORD, '/drops');
    await page.getByRole('link', { name: 'New voicemail drop' }).click();
    await page.waitForURL(`${base}/drops/new`);
    await assertAccessible(page, '/drops/new');
    await page.getByLabel('Name', { exact: true }).fill('Open house Saturday');
    await page.getByLabel('Callback number').fill('(202) 555-0143');
    await page.getByLabel('Audio upload').setInputFiles({ name: 'open-house.wav', mimeType: 'audio/wav', buffer: wavFile(6) });
    await page.getByLabel('Provider').selectOption('Sandbox');
    await page.getByRole('group', { name: 'Recipients: tags' }).getByLabel(HOSTILE.script).check();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(/\/drops\/\d+\/edit\?done=saved$/);
    const id = Number(/\/drops\/(\d+)\/edit/.exec(page.url())?.[1]);
    const saved = (await api.get(`/v3/voicemail_drops/${id}`)).body;
    assert.deepEqual(
      [saved.status, saved.name, saved.callback_number, saved.provider, saved.media.mime_type],
      ['Saved', 'Open house Saturday', '2025550143', 'Sandbox', 'audio/wav'],
    );
    assert.deepEqual(saved.recipients, [{ group: 'Tags', value: tag.body.id, label: HOSTILE.script }]);
    const src = await page.locator('audio').getAttribute('src');
    assert.ok(src?.startsWith('/media/'), String(src));
    assert.equal(new URL(saved.media.full_url).pathname, src, 'the player plays the API’s media');
    assert.equal((await page.request.get(`${base}${src}`)).status(), 200);
    await page.getByText('Calling hours.').waitFor();
    await assertInert(page);
    await assertAccessible(page, 'the drop edit page');

    // Without JavaScript at 375 px: a bad number and a recording too short are refused, the upload kept.
    const plain = await signedInPage(run, { email: agent.email, password: PASSWORD }, '/drops/new');
    await plain.getByLabel('Name', { exact: true }).fill('Price drop');
    await plain.getByLabel('Callback number').fill('call me');
    await plain.getByLabel('Audio upload').setInputFiles({ name: 'short.wav', mimeType: 'audio/wav', buffer: wavFile(2) });
    await plain.getByRole('button', { name: 'Save' }).click();
    const summary = plain.getByRole('alert').filter({ hasText: 'There is a problem' });
    await summary.getByRole('link', { name: /^Callback number / }).waitFor();
    await summary.getByRole('link', { name: /^Audio upload must name audio longer than/ }).waitFor();
    assert.equal(await plain.getByLabel('Name', { exact: true }).inputValue(), 'Price drop');
    assert.equal(await plain.getByLabel('Callback number').inputValue(), 'call me');
    assert.match((await plain.locator('audio').getAttribute('src')) ?? '', /^\/media\//, 'the refused upload keeps its player');
    await assertFitsWidth(plain);
    await plain.getByLabel('Callback number').fill('202-555-0143');
    await plain.getByLabel('Audio upload').setInputFiles({ name: 'longer.wav', mimeType: 'audio/wav', buffer: wavFile(7) });
    await plain.getByRole('button', { name: 'Send now' }).click();
    await plain.waitForURL(/\/drops\/\d+\?done=send$/);
    const sent = Number(/\/drops\/(\d+)/.exec(plain.url())?.[1]);
    const second = (await api.get(`/v3/voicemail_drops/${sent}`)).body;
    assert.equal(second.send_type, 'Now');
    assert.ok(['Scheduled', 'Sending', 'Sent'].includes(second.status), second.status);
    assert.notEqual(second.media.file_name, undefined);

    // A multipart post without the form's token is refused before anything is stored.
    const forged = await page.request.post(`${base}/drops/new`, { multipart: { name: 'Forged', action: 'save' } });
    assert.equal(forged.status(), 403);
    const outsider = await run.newPage({ javaScript: false });
    await signIn(outsider, base, stranger.email, PASSWORD, '/');
    assert.equal((await outsider.goto(`${base}/drops/${id}/edit`))?.status(), 403);
    assertClean(run);
  } finally {
    await run.close();
  }
});
