import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AGENT, client, dsn, type Sent, sendTo } from '../inbound/support.ts';
import { waitFor } from '../sending/support/wait.ts';
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
  startInboundBrowserRun,
} from './support/browser.ts';
import { setPassword } from './web-client.ts';

const PASSWORD = 'people browser passphrase';

/**
 * The "Done when" for the people pages, in Debian's chromium over HTTPS: /replies shows
 * the reply's words with its hostile HTML not run and the held one marked; /contacts/{id} shows
 * the email in the contact's history; /suppressions lists the bounced address with its reason and
 * lifting it there (JavaScript off, 375 px) makes the API show the contact free; axe-core clean.
 */
test('in a real browser: replies, a contact’s history and lifting a bounce from /suppressions', {
  timeout: 120_000,
  skip: skipBrowser,
}, async () => {
  const { s, run } = await startInboundBrowserRun({ INBOUND_FORWARDS_PER_DAY: '1' });
  try {
    const { base } = run;
    const agent = await createUser(s.t, 'User', await createTeam(s.t), { first_name: 'Jane', last_name: 'Agent' });
    await setPassword(s.t, agent.id, PASSWORD);
    s.owner = agent.id;
    s.api = asKey(s.t.app, agent.key);
    assert.equal((await s.api.put(`/v3/users/${agent.id}`, { sender_email: AGENT, sender_name: 'Jane Agent' })).status, 200);
    const sent = await sendTo(s, 6);
    const [bounced, replier, leaver] = sent.to as [Sent['to'][0], Sent['to'][0], Sent['to'][0]];
    assert.equal(
      (await s.api.put(`/v3/contacts/${replier.contactId}`, { first_name: HOSTILE.onerror, last_name: HOSTILE.css })).status,
      200,
    );
    const mta = client(s.port);
    await mta.sendMail({
      envelope: { from: '', to: bounced.returnPath },
      raw: dsn(bounced.returnPath, bounced.email, '5.1.1', '<dsn-1@mx.example.net>'),
    });
    for (const [i, words] of [`Yes please! ${HOSTILE.script}${HOSTILE.onerror}${HOSTILE.javascriptLink}`, 'And one more thing'].entries()) {
      await mta.sendMail({
        from: replier.email,
        to: replier.replyTo,
        subject: `Re: A question ${HOSTILE.breakout}`,
        text: words,
        html: `<p>${words}</p>`,
        messageId: `<r-${i}@client.example>`,
      });
    }
    await mta.sendMail({ from: leaver.email, to: leaver.unsubscribe, subject: 'unsubscribe', text: '', messageId: '<u-1@client.example>' });
    await waitFor('the bounce and the unsubscribe recorded', async () => {
      const statuses = await Promise.all([bounced, leaver].map(async (c) => (await s.api.get(`/v3/contacts/${c.contactId}`)).body.status));
      return statuses[0] === 'Inactive - Hard Bounce' && statuses[1] === 'Unsubscribed';
    });

    const page = await run.newPage();
    await signIn(page, base, agent.email, PASSWORD, '/replies');
    const replies = page.locator('article.reply');
    assert.equal(await replies.count(), 2);
    assert.match((await replies.filter({ hasText: 'Yes please!' }).textContent()) ?? '', /<script>alert\("script ran"\)<\/script>/);
    assert.equal(await page.locator('[data-held]').count(), 1, 'the held one marked');
    assert.match((await page.locator('[data-held]').textContent()) ?? '', /day’s forwards/);
    await assertInert(page);
    await assertAccessible(page, '/replies');
    // The held reply's Release and Discard: each a confirmation page first.
    await page.getByRole('link', { name: /^Release the reply/ }).click();
    await page.getByRole('heading', { name: 'Release this reply?' }).waitFor();
    await assertInert(page);
    await assertAccessible(page, 'the Release confirmation');
    await page.goto(`${base}/`);
    await assertAccessible(page, 'the dashboard, with sender health');
    const held = await signedInPage(run, { email: agent.email, password: PASSWORD }, '/replies');
    await held.getByRole('link', { name: /^Discard the reply/ }).click();
    await held.getByRole('heading', { name: 'Discard this reply?' }).waitFor();
    await assertFitsWidth(held);
    await held.getByRole('button', { name: 'Discard it' }).click();
    await held.getByText('The reply was discarded: it will never be forwarded.').waitFor();
    await held
      .locator('[data-decided]')
      .getByText(/^Discarded /)
      .waitFor();
    assert.equal(await held.getByRole('link', { name: /^Release the reply/ }).count(), 0, 'decided: no Release any more');
    await assertFitsWidth(held);

    await page.goto(`${base}/contacts`);
    await assertInert(page);
    await assertAccessible(page, '/contacts');
    await page.goto(`${base}/contacts/${bounced.contactId}`);
    const history = page.locator('table tbody tr');
    assert.equal(await history.count(), 1);
    assert.match((await history.textContent()) ?? '', new RegExp(`Email ${sent.emailId}[\\s\\S]*Bounced[\\s\\S]*5\\.1\\.1`));
    await assertAccessible(page, 'a contact');
    await page.goto(`${base}/contacts/${replier.contactId}`);
    await assertInert(page);
    await assertAccessible(page, 'a contact with replies');

    await page.goto(`${base}/suppressions`);
    await assertAccessible(page, '/suppressions');
    const bouncedRow = page.locator(`tr[data-suppression="email:${bounced.contactId}"]`);
    assert.match((await bouncedRow.textContent()) ?? '', /Hard bounce/);
    assert.match((await page.locator(`tr[data-suppression="email:${leaver.contactId}"]`).textContent()) ?? '', /only their own word/);

    // Lifting with JavaScript off, on a phone: select, confirm, and the API shows the contact free.
    const phone = await signedInPage(run, { email: agent.email, password: PASSWORD }, '/suppressions');
    await assertFitsWidth(phone);
    await phone.getByLabel(`Select ${bounced.email}`).check();
    await phone.getByRole('button', { name: 'Lift those selected…' }).click();
    await phone.getByRole('heading', { name: 'Lift suppressions?' }).waitFor();
    await assertFitsWidth(phone);
    await phone.getByRole('button', { name: 'Lift this suppression' }).click();
    await phone.getByText('1 suppression lifted').waitFor();
    const freed = (await s.api.get(`/v3/contacts/${bounced.contactId}`)).body;
    assert.equal(freed.status, 'Subscribed');
    assert.equal(freed.email_suppression, null);
    for (const path of ['/replies', '/contacts']) {
      await phone.goto(`${base}${path}`);
      await assertFitsWidth(phone);
    }
    assertClean(run);
  } finally {
    await run.close();
  }
});
