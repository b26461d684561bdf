import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { AGENT, client, dsn, sendTo } from '../inbound/support.ts';
import { upload, wavFile } from '../media/fixtures.ts';
import { readEmail } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { createTeam, createUser } from '../support/factories.ts';
import {
  assertAccessible,
  assertClean,
  assertFitsWidth,
  assertInert,
  HOSTILE,
  saveScreenshot,
  signedInPage,
  signIn,
  skipBrowser,
  startInboundBrowserRun,
} from './support/browser.ts';
import { setPassword } from './web-client.ts';

const PASSWORD = 'report scenario passphrase';

/** The report's counters as the page shows them, by the API's names. */
async function shownCounters(page: Page): Promise<Record<string, number>> {
  const pairs = await page
    .locator('#reporting > div')
    .evaluateAll(
      (divs) => divs.map((d) => [d.getAttribute('data-counter'), d.querySelector('dd')?.textContent ?? '']) as [string, string][],
    );
  return Object.fromEntries(pairs.map(([name, value]) => [name, Number(value.replaceAll(',', ''))]));
}

/**
 * The "Done when", for the report: an agent's email to six contacts — one hard-bounced,
 * one replied twice (the second held by INBOUND_FORWARDS_PER_DAY=1), one unsubscribed — read in a
 * real browser over HTTPS, with and without JavaScript.
 */
test('in a real browser: the report of an email with a bounce, two replies and an unsubscribe equals the API', {
  timeout: 120_000,
  skip: skipBrowser,
}, async () => {
  const { s, run } = await startInboundBrowserRun({ INBOUND_FORWARDS_PER_DAY: '1' });
  try {
    const { base } = run;
    // The email is an agent's (a User of a team), sent through the engine to six new contacts.
    const teamId = await createTeam(s.t);
    const agent = await createUser(s.t, 'User', teamId, { first_name: 'Jane', last_name: 'Agent' });
    const lead = await createUser(s.t, 'Team Administrator', teamId);
    const stranger = await createUser(s.t, 'User', await createTeam(s.t));
    for (const who of [agent, lead, stranger]) await setPassword(s.t, who.id, PASSWORD);
    s.owner = agent.id;
    s.api = asKey(s.t.app, agent.key);
    assert.equal((await s.api.put(`/v3/users/${agent.id}`, { sender_email: AGENT, sender_name: 'Jane Agent' })).status, 200);
    const sent = await sendTo(s, 6);
    const [bounced, replier, leaver] = sent.to as [(typeof sent.to)[0], (typeof sent.to)[0], (typeof sent.to)[0]];

    const mta = client(s.port);
    await mta.sendMail({
      envelope: { from: '', to: bounced.returnPath },
      raw: dsn(bounced.returnPath, bounced.email, '5.1.1', '<dsn-1@mx.example.net>'),
    });
    for (const [i, words] of [`Yes please! ${HOSTILE.script}${HOSTILE.onerror}`, 'And one more thing'].entries()) {
      await mta.sendMail({
        from: replier.email,
        to: replier.replyTo,
        subject: 'Re: A question',
        text: words,
        html: `<p>${words}</p>`,
        messageId: `<r-${i}@client.example>`,
      });
    }
    await mta.sendMail({ from: leaver.email, to: leaver.unsubscribe, subject: 'unsubscribe', text: '', messageId: '<u-1@client.example>' });
    const replies = (await s.api.get(`/v3/templated_emails/${sent.emailId}/replies`)).body.data;
    assert.deepEqual(replies.map((r: { held_reason: string | null }) => r.held_reason).sort(), ['forward_limit', null]);
    const api = await waitFor('the outcomes counted', async () => {
      const { reporting } = await readEmail(s, sent.emailId);
      return reporting.hard_bounce === 1 && reporting.unsubscribe === 1 && reporting.reply >= 1 && reporting;
    });
    const { date: _, ...reporting } = api;

    // The agent reads the report, at 1,100 px with script, and on a phone without.
    const page = await run.newPage();
    await signIn(page, base, agent.email, PASSWORD, `/emails/${sent.emailId}`);
    assert.deepEqual(await shownCounters(page), reporting);
    const charts = page.getByRole('img');
    assert.ok((await charts.count()) >= 2);
    assert.match((await charts.first().getAttribute('aria-label')) ?? '', /^Funnel: Sent 6, Delivered/);
    const rows = page.locator('#recipients tbody tr');
    assert.equal(await rows.count(), 6);
    const bouncedRow = rows.filter({ hasText: bounced.email });
    assert.match((await bouncedRow.textContent()) ?? '', /Bounced[\s\S]*User unknown \(permanent\): 5\.1\.1[\s\S]*said by dsn/);
    const deliveries = (await s.api.get(`/v3/templated_emails/${sent.emailId}/deliveries`)).body.data;
    for (const d of deliveries) assert.equal(await rows.filter({ hasText: d.address }).count(), 1, d.address);
    await assertAccessible(page, 'the report');
    await assertInert(page);
    const preview = page.frames().find((frame) => frame.url().endsWith(`/emails/${sent.emailId}/preview`));
    assert.match(
      (await preview?.content()) ?? '',
      /Have you thought about the market this spring/,
      'the email as sent, in its sandboxed frame',
    );
    await saveScreenshot(page, 'report');

    const phone = await signedInPage(run, { email: agent.email, password: PASSWORD }, `/emails/${sent.emailId}`);
    assert.deepEqual(await shownCounters(phone), reporting, 'the same without JavaScript');
    await assertFitsWidth(phone);
    await phone.getByLabel('State').selectOption('bounced');
    await phone.getByRole('button', { name: 'Filter' }).click();
    assert.equal(await phone.locator('#recipients tbody tr').count(), 1);

    // The other pages the issue names, checked by axe-core with the agent's data on them.
    const media = await upload(s.t.app, agent.key, agent.id, 'listing.wav', wavFile(6));
    const drop = await s.api.post(`/v3/users/${agent.id}/voicemail_drops`, {
      provider: 'Sandbox',
      media_id: media.id,
      callback_number: '2025550143',
      name: 'Open house call',
    });
    assert.equal(drop.status, 201, drop.raw);
    for (const path of ['/', '/emails', '/drops', `/drops/${drop.body.id}`]) {
      await page.goto(`${base}${path}`);
      await assertAccessible(page, path);
      if (path === '/') await saveScreenshot(page, 'dashboard');
    }
    await page.goto(`${base}/drops`);
    await page.getByRole('link', { name: 'Open house call', exact: true }).click();
    await page.getByRole('heading', { name: 'Open house call' }).waitFor();

    // Another team's User is refused the report; the agent's Team Administrator reads it.
    const outsider = await signedInPage(run, { email: stranger.email, password: PASSWORD }, '/', { javaScript: true, width: 1100 });
    assert.equal((await outsider.goto(`${base}/emails/${sent.emailId}`))?.status(), 403);
    const teamLead = await signedInPage(run, { email: lead.email, password: PASSWORD }, '/', { javaScript: true, width: 1100 });
    assert.equal((await teamLead.goto(`${base}/emails/${sent.emailId}`))?.status(), 200);
    assert.deepEqual(await shownCounters(teamLead), reporting);
    assertClean(run);
  } finally {
    await run.close();
  }
});
