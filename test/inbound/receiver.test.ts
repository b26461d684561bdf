import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { parseEmail } from '../sending/support/mime.ts';
import type { SendingApp } from '../sending/support/sending-app.ts';
import { readEmail } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { createUser } from '../support/factories.ts';
import { AGENT, arf, client, dsn, INBOUND_DOMAIN, type Sent, sendTo, startInboundApp } from './support.ts';

/**
 * The inbound receiver over real SMTP (nodemailer as the remote MTA, STARTTLS): replies counted
 * once per delivery and forwarded to the agent, automatic replies kept but not counted, bounces,
 * complaints and mailed unsubscribes recorded once, unknown recipients and oversized messages refused.
 */
describe('inbound mail', () => {
  let s: SendingApp & { port: number };
  let sent: Sent;
  before(async () => {
    // The feedback loop of the complaints below, its SPF naming this machine: its reports count
    // wherever they arrive (test/security/inbound-reports.test.ts for those that do not).
    s = await startInboundApp(
      { INBOUND_MAX_BYTES: '65536', INBOUND_FEEDBACK_LOOPS: 'staff@hotmail.example' },
      { 'hotmail.example': { TXT: ['v=spf1 ip4:127.0.0.1 -all'] } },
    );
    sent = await sendTo(s, 6);
  });
  after(() => s.close());

  const reporting = async () => (await readEmail(s, sent.emailId)).reporting;
  const contact = async (id: number) => (await s.api.get(`/v3/contacts/${id}`)).body;
  const reply = (from: string, to: string, messageId: string, extra: Record<string, unknown> = {}) =>
    client(s.port).sendMail({ from, to, subject: 'Re: A question for you', text: 'Yes, call me on Friday!', messageId, ...extra });

  test('outgoing email carries signed per-delivery addresses at INBOUND_DOMAIN', () => {
    const pattern = (prefix: string) => new RegExp(`^${prefix}-[0-9a-f]{52}@${INBOUND_DOMAIN.replace(/\./g, '\\.')}$`);
    for (const to of sent.to) {
      assert.match(to.replyTo, pattern('r'));
      assert.match(to.returnPath, pattern('b'));
      assert.match(to.unsubscribe, pattern('u'));
    }
    assert.equal(new Set(sent.to.map((t) => t.replyTo)).size, sent.to.length, 'one token per delivery');
  });

  test('a reply is stored, counted once and forwarded to the agent with the contact as Reply-To; a retried delivery changes nothing', async () => {
    const pat = sent.to[0]!;
    const messageId = `<reply-${randomBytes(4).toString('hex')}@mail.example>`;
    const info = await reply(`Pat Contact <${pat.email}>`, pat.replyTo, messageId);
    assert.match(info.response, /^250/);
    await waitFor('the forward', () => s.sink.to(AGENT).length === 1);
    const forward = parseEmail(s.sink.to(AGENT)[0]!.raw);
    assert.equal(forward.headers.get('reply-to'), `Pat Contact <${pat.email}>`);
    assert.equal(forward.headers.get('subject'), 'Re: A question for you');
    assert.match(forward.text ?? '', /call me on Friday/);
    assert.equal((await reporting()).reply, 1);

    // The sending MTA delivers the same message again (its 250 was lost): nothing changes.
    await reply(`Pat Contact <${pat.email}>`, pat.replyTo, messageId);
    // A second, different reply from the same contact is stored but the delivery counts once.
    await reply(`Pat Contact <${pat.email}>`, pat.replyTo, `<other-${randomBytes(4).toString('hex')}@mail.example>`);
    await waitFor('the second forward', () => s.sink.to(AGENT).length === 2);
    assert.equal((await reporting()).reply, 1);
    const listed = await s.api.get(`/v3/templated_emails/${sent.emailId}/replies?contact_id=${pat.contactId}`);
    assert.equal(listed.status, 200, listed.raw);
    assert.equal(listed.body.meta.total, 2);
    assert.equal(listed.body.data[0].from_address, pat.email);
    assert.equal(listed.body.data[0].text.trim(), 'Yes, call me on Friday!');
    assert.equal(listed.body.data[0].auto_reply, false);
  });

  test('an automatic reply is stored and marked, not counted, not forwarded', async () => {
    const ann = sent.to[1]!;
    const before = s.sink.to(AGENT).length;
    for (const [i, extra] of [
      { headers: { 'Auto-Submitted': 'auto-replied' } },
      { headers: { Precedence: 'bulk' } },
      { headers: { 'X-Autoreply': 'yes' } },
      { subject: 'Out of Office: back on Monday' },
    ].entries()) {
      await reply(ann.email, ann.replyTo, `<auto-${i}-${randomBytes(4).toString('hex')}@mail.example>`, extra);
    }
    const listed = await s.api.get(`/v3/templated_emails/${sent.emailId}/replies?contact_id=${ann.contactId}`);
    assert.equal(listed.body.meta.total, 4);
    assert.ok(listed.body.data.every((r: { auto_reply: boolean }) => r.auto_reply));
    const auto = await s.api.get(`/v3/templated_emails/${sent.emailId}/replies?auto_reply=true`);
    assert.equal(auto.body.meta.total, 4);
    assert.equal((await reporting()).reply, 1, 'only the person who wrote counts');
    assert.equal(s.sink.to(AGENT).length, before);
  });

  test('DSN 5.1.1: bounced, hard bounce, contact retired; DSN 4.2.2: soft bounce only', async () => {
    const hard = sent.to[2]!;
    const soft = sent.to[3]!;
    const mta = client(s.port);
    const hardId = `<dsn-${randomBytes(4).toString('hex')}@mx.example.net>`;
    for (let i = 0; i < 2; i++) {
      await mta.sendMail({ envelope: { from: '', to: hard.returnPath }, raw: dsn(hard.returnPath, hard.email, '5.1.1', hardId) });
    }
    await mta.sendMail({
      envelope: { from: '', to: soft.returnPath },
      raw: dsn(soft.returnPath, soft.email, '4.2.2', `<dsn-${randomBytes(4).toString('hex')}@mx.example.net>`),
    });
    const counters = await reporting();
    assert.deepEqual([counters.bounce, counters.hard_bounce, counters.soft_bounce], [1, 1, 1]);
    assert.equal((await contact(hard.contactId)).status, 'Inactive - Hard Bounce');
    assert.equal((await contact(soft.contactId)).status, 'Subscribed');
    const deliveries = await s.api.get(
      `/v3/templated_emails/${sent.emailId}/deliveries?contact_id=${hard.contactId}&contact_id=${soft.contactId}`,
    );
    const stateOf = (id: number) => deliveries.body.data.find((d: { contact_id: number }) => d.contact_id === id).state;
    assert.equal(stateOf(hard.contactId), 'bounced');
    assert.equal(stateOf(soft.contactId), 'sent');
  });

  test('an ARF complaint from a known feedback loop counts spamreport and retires the contact; so does one sent to postmaster', async () => {
    const bob = sent.to[4]!;
    const mta = client(s.port);
    const id = `<arf-${randomBytes(4).toString('hex')}@hotmail.example>`;
    await mta.sendMail({
      envelope: { from: 'staff@hotmail.example', to: bob.returnPath },
      raw: arf(bob.returnPath, { to: bob.email, ...bob }, id),
    });
    await mta.sendMail({
      envelope: { from: 'staff@hotmail.example', to: bob.returnPath },
      raw: arf(bob.returnPath, { to: bob.email, ...bob }, id),
    });
    await mta.sendMail({
      envelope: { from: 'staff@hotmail.example', to: `postmaster@${INBOUND_DOMAIN}` },
      raw: arf(`postmaster@${INBOUND_DOMAIN}`, { to: bob.email, ...bob }, `<arf-pm-${randomBytes(4).toString('hex')}@hotmail.example>`),
    });
    assert.equal((await reporting()).spamreport, 1);
    assert.equal((await contact(bob.contactId)).status, 'Inactive - Spam Complaint');
  });

  test('a mailed unsubscribe unsubscribes the contact and counts once', async () => {
    const cy = sent.to[5]!;
    for (let i = 0; i < 2; i++) {
      await client(s.port).sendMail({
        from: cy.email,
        to: cy.unsubscribe,
        subject: 'unsubscribe',
        text: '',
        messageId: `<u-${i}@mail.example>`,
      });
    }
    assert.equal((await reporting()).unsubscribe, 1);
    assert.equal((await contact(cy.contactId)).status, 'Unsubscribed');
  });

  test('unknown or forged recipients are refused at RCPT with 550; an oversized message with 552', async () => {
    const forged = `r-${'ab'.repeat(26)}@${INBOUND_DOMAIN}`;
    const wrongPurpose = sent.to[0]!.replyTo.replace(/^r-/, 'b-');
    for (const to of [
      `someone@${INBOUND_DOMAIN}`,
      forged,
      wrongPurpose,
      sent.to[0]!.replyTo.replace(INBOUND_DOMAIN, 'elsewhere.example'),
    ]) {
      await assert.rejects(
        reply('x@mail.example', to, '<x@mail.example>'),
        (error: { responseCode?: number }) => error.responseCode === 550,
        to,
      );
    }
    await assert.rejects(
      client(s.port).sendMail({ from: 'x@mail.example', to: sent.to[0]!.replyTo, subject: 'big', text: 'x'.repeat(70_000) }),
      (error: { responseCode?: number }) => error.responseCode === 552,
    );
  });

  test('GET /templated_emails/{id}/replies: paged envelope, filters checked, bad ids and other users refused', async () => {
    const page = await s.api.get(`/v3/templated_emails/${sent.emailId}/replies?per_page=1&page=2`);
    assert.equal(page.status, 200, page.raw);
    assert.equal(page.body.meta.per_page, 1);
    assert.equal(page.body.meta.current_page, 2);
    assert.equal(page.body.data.length, 1);
    assert.equal(page.body.meta.total, 6);
    const humans = await s.api.get(`/v3/templated_emails/${sent.emailId}/replies?auto_reply=false`);
    assert.equal(humans.body.meta.total, 2);
    for (const query of ['auto_reply=maybe', 'contact_id=abc', 'per_page=100000', 'color=red']) {
      const bad = await s.api.get(`/v3/templated_emails/${sent.emailId}/replies?${query}`);
      assert.equal(bad.status, 400, `${query}: ${bad.raw}`);
    }
    for (const id of ['abc', '0', '99999999', '1e3', '9'.repeat(30)]) {
      const missing = await s.api.get(`/v3/templated_emails/${id}/replies`);
      assert.ok([400, 404].includes(missing.status), `${id}: ${missing.raw}`);
    }
    const stranger = asKey(s.t.app, (await createUser(s.t, 'User')).key);
    const refused = await stranger.get(`/v3/templated_emails/${sent.emailId}/replies`);
    assert.ok([403, 404].includes(refused.status), refused.raw);
  });
});
