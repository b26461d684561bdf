import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { AGENT, client, dsn, sendTo, startInboundApp } from '../test/inbound/support.ts';
import { upload, wavFile } from '../test/media/fixtures.ts';
import { readEmail } from '../test/sending/support/sending-app.ts';
import { waitFor } from '../test/sending/support/wait.ts';
import { asKey } from '../test/support/client.ts';
import { createTeam, createUser } from '../test/support/factories.ts';
import { onPath, tools } from '../test/support/tools.ts';
import { openBrowser, signIn, testCertificate } from '../test/web/support/browser.ts';
import { startHttpReceiver } from '../test/web/support/http-receiver.ts';
import { setPassword } from '../test/web/web-client.ts';

/**
 * The screenshots of docs/web.md, one per page: `npm run docs:screenshots` (run by hand; no test
 * writes docs/). Hopper starts as a test app on PGlite with workers, an SMTP sink and its inbound
 * receiver; an agent's email goes to eight contacts through the engine, and real mail comes back —
 * a hard bounce (a DSN), two replies from one contact (the second held by the day's forward
 * limit), an unsubscribe — with a webhook endpoint hearing the deliveries, a scheduled voicemail
 * drop and a Team Administrator. Each page is opened in Debian's chromium at 1280 × 900 and saved
 * as docs/<name>.png, cropped to the viewport and, when `pngquant` is installed, quantised.
 */
const PASSWORD = 'docs screenshots passphrase';
const DOCS = join(import.meta.dirname, '..', 'docs');
const WIDTH = 1280;
const HEIGHT = 900;
const PNGQUANT = onPath('pngquant');
const PEOPLE = [
  ['Maria', 'Lopez'],
  ['James', 'Carter'],
  ['Aisha', 'Khan'],
  ['Tom', 'Becker'],
  ['Lena', 'Park'],
  ['Omar', 'Haddad'],
  ['Grace', 'Kim'],
  ['Ruth', 'Olsen'],
] as const;

if (tools.chromium.skip) throw new Error(`chromium is needed: ${tools.chromium.skip}`);
const receiver = await startHttpReceiver();
const tls = await testCertificate();
const s = await startInboundApp(
  { INBOUND_FORWARDS_PER_DAY: '1', WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_POLL_INTERVAL: '100ms' },
  {},
  { https: { key: tls.key, cert: tls.cert } },
);
const run = await openBrowser(s.t, async () => {
  await s.close();
  await tls.remove();
});
try {
  const teamId = await createTeam(s.t, 'Harbor Realty');
  const agent = await createUser(s.t, 'User', teamId, {
    first_name: 'Jane',
    last_name: 'Agent',
    email: 'jane@harbor-realty.example',
    time_zone: 'America/New_York',
  });
  const lead = await createUser(s.t, 'Team Administrator', teamId, {
    first_name: 'Sam',
    last_name: 'Rivera',
    email: 'sam@harbor-realty.example',
  });
  await createUser(s.t, 'User', teamId, { first_name: 'Priya', last_name: 'Shah', email: 'priya@harbor-realty.example' });
  for (const who of [agent, lead]) await setPassword(s.t, who.id, PASSWORD);
  s.owner = agent.id;
  s.api = asKey(s.t.app, agent.key);
  assert.equal((await s.api.put(`/v3/users/${agent.id}`, { sender_email: AGENT, sender_name: 'Jane Agent' })).status, 200);
  assert.equal((await s.api.post(`/v3/users/${agent.id}/api_keys`, { name: 'CRM sync' })).status, 201);
  const hook = await s.api.post(`/v3/users/${agent.id}/webhooks`, {
    url: receiver.url,
    description: 'CRM sync',
    events: ['delivery.sent', 'delivery.delivered', 'delivery.bounced', 'contact.created', 'contact.unsubscribed'],
  });
  assert.equal(hook.status, 201, hook.raw);

  const person = (i: number) => {
    const [first, last] = PEOPLE[i] ?? ['Pat', 'Doe'];
    return {
      first_name: first,
      last_name: last,
      email: `${first}.${last}@mail.example`.toLowerCase(),
      phone: `727555${String(143 + i).padStart(4, '0')}`,
    };
  };
  const sent = await sendTo(s, PEOPLE.length, person, {
    subject: 'Open house this Saturday',
    body: '<p>We are showing 14 Harbor Lane this Saturday from 11 to 2. Would you like a tour, {{first_name}}?</p>',
  });
  assert.equal((await s.api.put(`/v3/tags/${sent.tagId}`, { name: 'Open house' })).status, 200);
  const [bounced, replier, leaver, second] = sent.to as [
    (typeof sent.to)[0],
    (typeof sent.to)[0],
    (typeof sent.to)[0],
    (typeof sent.to)[0],
  ];
  const mta = client(s.port);
  await mta.sendMail({
    envelope: { from: '', to: bounced.returnPath },
    raw: dsn(bounced.returnPath, bounced.email, '5.1.1', '<dsn-1@mx.example.net>'),
  });
  const replies: [typeof replier, string][] = [
    [replier, 'Yes please! Could we come at 11:30? My husband would like to see the garden.'],
    [replier, 'Also — is the garage big enough for two cars?'],
    [second, 'Thanks Jane, we bought last month. Good luck with the sale!'],
  ];
  for (const [i, [who, words]] of replies.entries()) {
    await mta.sendMail({
      from: who.email,
      to: who.replyTo,
      subject: 'Re: Open house this Saturday',
      text: words,
      messageId: `<r-${i}@client.example>`,
    });
  }
  await mta.sendMail({ from: leaver.email, to: leaver.unsubscribe, subject: 'unsubscribe', text: '', messageId: '<u-1@client.example>' });
  await waitFor('the outcomes counted', async () => {
    const { reporting } = await readEmail(s, sent.emailId);
    return reporting.hard_bounce === 1 && reporting.unsubscribe === 1 && reporting.reply >= 2 && reporting;
  });
  await waitFor('the webhook deliveries', async () => receiver.received.length >= 8);

  // A draft for the list, and a voicemail drop scheduled for next week.
  await s.api.post(`/v3/users/${agent.id}/templated_emails`, { subject: 'Spring market report', body: '<p>Prices in Harbor County…</p>' });
  const media = await upload(s.t.app, agent.key, agent.id, 'open-house.wav', wavFile(6));
  const drop = await s.api.post(`/v3/users/${agent.id}/voicemail_drops`, {
    provider: 'Sandbox',
    media_id: media.id,
    callback_number: '2025550143',
    name: 'Open house call',
    description: 'A reminder of Saturday’s open house',
    status: 'Scheduled',
    send_type: 'Future',
    send_at: new Date(Date.now() + 7 * 86_400_000).toISOString().replace(/\.\d+Z$/, 'Z'),
    recipients: [{ group: 'Tags', value: sent.tagId }],
  });
  assert.equal(drop.status, 201, drop.raw);

  const page = await run.newPage({ width: WIDTH });
  await page.setViewportSize({ width: WIDTH, height: HEIGHT });
  const shoot = async (path: string, name: string, on: Page = page) => {
    const answer = await on.goto(`${run.base}${path}`);
    assert.equal(answer?.status(), 200, path);
    const file = join(DOCS, `${name}.png`);
    await on.screenshot({ path: file });
    if (PNGQUANT) execFileSync(PNGQUANT, ['--force', '--skip-if-larger', '--quality=70-95', '--output', file, file]);
    console.log(`docs/${name}.png  ${path}`);
  };
  const signedOut = await run.newPage({ width: WIDTH });
  await signedOut.setViewportSize({ width: WIDTH, height: HEIGHT });
  await shoot('/login', 'login', signedOut);

  await signIn(page, run.base, agent.email, PASSWORD);
  const webhooks = (await s.api.get(`/v3/users/${agent.id}/webhooks`)).body.data;
  for (const [path, name] of [
    ['/', 'dashboard'],
    ['/emails', 'emails'],
    [`/emails/${sent.emailId}`, 'report'],
    ['/emails/new', 'email-compose'],
    ['/drops', 'drops'],
    [`/drops/${drop.body.id}`, 'drop-report'],
    ['/drops/new', 'drop-compose'],
    ['/replies', 'replies'],
    ['/contacts', 'contacts'],
    [`/contacts/${replier.contactId}`, 'contact'],
    ['/contacts/import', 'contact-import'],
    ['/suppressions', 'suppressions'],
    ['/account/settings', 'settings'],
    ['/account/settings/integrations', 'integrations'],
    ['/account/settings/webhooks', 'webhooks'],
    [`/account/settings/webhooks/${webhooks[0].id}`, 'webhook-endpoint'],
  ] as const) {
    await shoot(path, name);
  }
  const manager = await run.newPage({ width: WIDTH });
  await manager.setViewportSize({ width: WIDTH, height: HEIGHT });
  await signIn(manager, run.base, lead.email, PASSWORD);
  await shoot('/users', 'users', manager);
} finally {
  await run.close();
  await receiver.close();
}
