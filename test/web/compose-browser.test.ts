import assert from 'node:assert/strict';
import { test } from 'node:test';
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
import { browser, setPassword } from './web-client.ts';

const PASSWORD = 'compose browser passphrase';

test('in a real browser: /emails/new filled by its labels is found by the API; a refused form keeps what was typed', {
  timeout: 300_000,
  skip: skipBrowser,
}, async () => {
  const run = await startBrowserRun();
  try {
    const { t, base } = run;
    const teamId = await createTeam(t);
    const agent = await createUser(t, 'User', teamId, { time_zone: 'America/New_York' });
    const lead = await createUser(t, 'Team Administrator', teamId);
    const stranger = await createUser(t, 'User', await createTeam(t));
    for (const who of [agent, lead, stranger]) await setPassword(t, who.id, PASSWORD);
    const api = asKey(t.app, agent.key);
    const tag = await api.post(`/v3/users/${agent.id}/tags`, { name: 'Buyers' });
    assert.equal(tag.status, 201, tag.raw);
    await api.post(`/v3/users/${agent.id}/tags`, { name: 'Sellers' });
    const pat = await api.post(`/v3/users/${agent.id}/contacts`, {
      email: 'pat@example.com',
      first_name: 'Pat',
      last_name: HOSTILE.onerror,
    });
    assert.equal(pat.status, 201, pat.raw);

    // The Done-when: filled by its labels (Subject, Body, the tag's checkbox) and saved.
    const page = await run.newPage();
    await signIn(page, base, agent.email, PASSWORD, '/emails');
    await page.getByRole('link', { name: 'New email' }).click();
    await page.waitForURL(`${base}/emails/new`);
    await assertAccessible(page, '/emails/new');
    await page.getByLabel('Subject').fill(`Open house ${HOSTILE.script}`);
    await page.getByLabel('Body', { exact: true }).fill('<p>Come and see the house on Saturday.</p>');
    await page.getByRole('group', { name: 'Recipients: tags' }).getByLabel('Buyers').check();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(/\/emails\/\d+\/edit\?done=saved$/);
    const id = Number(/\/emails\/(\d+)\/edit/.exec(page.url())?.[1]);
    const saved = (await api.get(`/v3/templated_emails/${id}`)).body;
    assert.equal(saved.status, 'Saved');
    assert.equal(saved.subject, `Open house ${HOSTILE.script}`);
    assert.deepEqual(saved.recipients, [{ group: 'Tags', value: tag.body.id, label: 'Buyers' }]);
    await page.getByText('Saved as a draft.').waitFor();
    assert.equal(await page.getByLabel('Subject').inputValue(), saved.subject, 'the edit page shows what the API has');
    assert.ok(await page.getByRole('group', { name: 'Recipients: tags' }).getByLabel('Buyers').isChecked());
    assert.equal(await page.locator('iframe[sandbox][src]').getAttribute('src'), `/emails/${id}/preview`);
    await assertInert(page);
    await assertAccessible(page, 'the edit page');

    // Schedule in the agent's time zone, then Cancel takes it back to a draft.
    await page.getByLabel('Send at').fill('2030-01-15T09:30');
    await page.getByRole('button', { name: 'Schedule' }).click();
    await page.waitForURL(`${base}/emails/${id}?done=schedule`);
    const scheduled = (await api.get(`/v3/templated_emails/${id}`)).body;
    assert.deepEqual([scheduled.status, scheduled.send_type, scheduled.send_at], ['Scheduled', 'Future', '2030-01-15T14:30:00Z']);
    await page.getByRole('link', { name: 'Edit' }).click();
    assert.equal(await page.getByLabel('Send at').inputValue(), '2030-01-15T09:30');
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.waitForURL(`${base}/emails/${id}?done=cancel`);
    assert.equal((await api.get(`/v3/templated_emails/${id}`)).body.status, 'Saved');

    // Without JavaScript, 375 px wide: a refused form (no body) says so and keeps what was typed;
    // a contact search re-renders the form, and the contact ticked is a recipient.
    const plain = await signedInPage(run, { email: agent.email, password: PASSWORD }, '/emails/new');
    await assertFitsWidth(plain);
    await plain.getByLabel('Subject').fill('Price drop');
    await plain.getByLabel('Find contacts').fill('pat@');
    await plain.getByRole('button', { name: 'Find contacts' }).click();
    await plain.getByText('1 more contact found.').waitFor();
    assert.equal(await plain.getByLabel('Subject').inputValue(), 'Price drop', 'the search keeps what was typed');
    await plain
      .getByRole('group', { name: 'Recipients: contacts' })
      .getByLabel(/pat@example\.com/)
      .check();
    // Preview before saving: the email as Pat will see it, in the sandboxed frame; the form keeps
    // what was typed and nothing is saved.
    const before = (await api.get(`/v3/users/${agent.id}/templated_emails`)).body.meta.total;
    await plain.getByLabel('Body', { exact: true }).fill(`<p>Just for you, {{first_name}}: 5 % less.</p>${HOSTILE.script}`);
    await plain.getByRole('button', { name: 'Preview' }).click();
    const preview = plain.frameLocator('iframe[name="email-preview"]');
    await preview.getByText('Just for you, Pat: 5 % less.').waitFor();
    await preview.getByText('Hi Pat,').waitFor();
    await preview.getByText('Subject: Price drop').waitFor();
    assert.equal(await preview.locator('script').count(), 0, 'the body cleaned as saving cleans it');
    assert.equal(await plain.getByLabel('Subject').inputValue(), 'Price drop', 'the form keeps what was typed');
    assert.match(await plain.getByLabel('Body', { exact: true }).inputValue(), /^<p>Just for you, \{\{first_name\}\}/);
    assert.equal(plain.url(), `${base}/emails/new`);
    assert.equal((await api.get(`/v3/users/${agent.id}/templated_emails`)).body.meta.total, before, 'nothing saved');
    await assertFitsWidth(plain);
    await plain.getByLabel('Body', { exact: true }).fill('');
    await plain.getByRole('button', { name: 'Save' }).click();
    const summary = plain.getByRole('alert').filter({ hasText: 'There is a problem' });
    await summary.getByRole('link', { name: /^Body / }).click();
    assert.equal(await plain.evaluate('document.activeElement.id'), 'body');
    assert.equal(await plain.getByLabel('Subject').inputValue(), 'Price drop');
    assert.ok(
      await plain
        .getByRole('group', { name: 'Recipients: contacts' })
        .getByLabel(/pat@example\.com/)
        .isChecked(),
    );
    await assertInert(plain);
    await assertFitsWidth(plain);
    await plain.getByLabel('Body', { exact: true }).fill('Now 10 % less.');
    await plain.getByRole('button', { name: 'Save' }).click();
    await plain.waitForURL(/\/emails\/\d+\/edit\?done=saved$/);
    const second = Number(/\/emails\/(\d+)\/edit/.exec(plain.url())?.[1]);
    const found = (await api.get(`/v3/templated_emails/${second}`)).body;
    assert.deepEqual(
      found.recipients.map((r: { group: string; value: number }) => [r.group, r.value]),
      [['Contacts', pat.body.id]],
    );

    // The preview's own document is a sandbox; without the form's token it is refused.
    const http = browser(t.app);
    await http.signIn(agent.email, PASSWORD);
    await http.get('/emails/new');
    const framed = await http.post('/emails/preview', { subject: 'Hello {{first_name}}', body: '<p onclick="x()">Hi</p>' });
    assert.equal(framed.status, 200);
    assert.match(String(framed.headers['content-security-policy']), /^sandbox; default-src 'none'/);
    assert.match(framed.html, /Subject: <strong>Hello Pat<\/strong>/);
    assert.match(framed.html, /<p>Hi<\/p>/, 'the handler removed');
    assert.equal((await http.post('/emails/preview', { subject: 'x', _csrf: '' })).status, 403);

    // The access rule: another team's User gets 403, the agent's Team Administrator acting for them sees it.
    const outsider = await run.newPage({ javaScript: false });
    await signIn(outsider, base, stranger.email, PASSWORD, '/');
    assert.equal((await outsider.goto(`${base}/emails/${id}/edit`))?.status(), 403);
    assert.equal((await outsider.goto(`${base}/emails/99999999/edit`))?.status(), 404);
    const teamLead = await run.newPage({ javaScript: false, width: 800 });
    await signIn(teamLead, base, lead.email, PASSWORD, '/');
    assert.equal((await teamLead.goto(`${base}/emails/${id}/edit`))?.status(), 200);
    assertClean(run);
  } finally {
    await run.close();
  }
});
