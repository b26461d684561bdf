import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { parseEmail } from '../sending/support/mime.ts';
import { type Audience, audience, createEmail, readEmail, type SendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { type Receiver, startReceiver } from '../webhooks/support/receiver.ts';
import { AGENT, client, startInboundApp } from './support.ts';

/**
 * Hard means the address is dead (docs/outcomes.md, "Email outcomes"): a full mailbox, a DMARC
 * rejection, a block are soft bounces — the delivery ends `bounced` with its reason (DSN status,
 * the server's words, Hopper's classification) in the listing and the `delivery.bounced` webhook,
 * and the contact stays; three soft bounces in 7 days retire the address as
 * `Inactive - Repeated Soft Bounce`, which the owner lifts in bulk. Nothing at a bounce address is
 * a reply, and a bounce at a reply address is a bounce.
 */
describe('soft bounces over real SMTP', () => {
  let s: SendingApp & { port: number };
  let receiver: Receiver;
  let offset = 0;
  before(async () => {
    receiver = await startReceiver();
    s = await startInboundApp(
      { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_CA_FILE: receiver.caFile, WEBHOOK_RETRY_BASE: '100ms', WEBHOOK_POLL_INTERVAL: '50ms' },
      {},
      { clock: () => new Date(Date.now() + offset) },
    );
  });
  after(async () => {
    await s?.close();
    await receiver?.close();
  });

  /** A templated email to `people`; per contact, the addresses its message carried. */
  const send = async (people: Audience) => {
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    assert.equal((await waitForStatus(s, email.id, ['Sent', 'Failed'], 60_000)).status, 'Sent');
    const deliveries = (await s.api.get(`/v3/templated_emails/${email.id}/deliveries?per_page=100`)).body.data as {
      id: number;
      contact_id: number;
    }[];
    return {
      id: email.id as number,
      to: people.contacts.map((c) => {
        const message = s.sink.to(c.email).at(-1);
        assert.ok(message);
        const headers = parseEmail(message.raw).headers;
        const delivery = deliveries.find((d) => d.contact_id === c.id);
        assert.ok(delivery);
        return {
          contactId: c.id,
          email: c.email,
          deliveryId: delivery.id,
          returnPath: message.from,
          replyTo: /<([^>]+)>/.exec(headers.get('reply-to') ?? '')?.[1] ?? '',
        };
      }),
    };
  };
  const contact = async (id: number) => (await s.api.get(`/v3/contacts/${id}`)).body;
  /** A Postfix bounce (RFC 3464) about `recipient`, with the remote server's answer. */
  const bounce = (to: string, recipient: string, status: string, said: string) =>
    [
      'From: MAILER-DAEMON@mx.example.net (Mail Delivery System)',
      `To: ${to}`,
      'Subject: Undelivered Mail Returned to Sender',
      `Message-ID: <${randomBytes(6).toString('hex')}@mx.example.net>`,
      'Auto-Submitted: auto-replied',
      'MIME-Version: 1.0',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="b1"',
      '',
      '--b1',
      'Content-Type: text/plain; charset=us-ascii',
      '',
      "I'm sorry to have to inform you that your message could not",
      'be delivered to one or more recipients.',
      '',
      `<${recipient}>: host mx.example.org[192.0.2.9] said: ${said} (in reply to end of DATA command)`,
      '',
      '--b1',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.example.net',
      '',
      `Final-Recipient: rfc822; ${recipient}`,
      'Action: failed',
      `Status: ${status}`,
      'Remote-MTA: dns; mx.example.org',
      `Diagnostic-Code: smtp; ${said}`,
      '',
      '--b1--',
      '',
    ].join('\r\n');
  const deliverBounce = (to: string, recipient: string, status: string, said: string) =>
    client(s.port).sendMail({ envelope: { from: '', to }, raw: bounce(to, recipient, status, said) });

  test('a full mailbox, a DMARC rejection and a Microsoft block: the delivery bounces with its reason, the contact stays', async () => {
    const endpoint = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url: receiver.url, events: ['delivery.bounced'] });
    assert.equal(endpoint.status, 201, endpoint.raw);
    const people = await audience(s, 3);
    const email = await send(people);
    const [full, dmarc, blocked] = email.to as [(typeof email.to)[0], (typeof email.to)[0], (typeof email.to)[0]];
    await deliverBounce(full.returnPath, full.email, '5.2.2', '552 5.2.2 Mailbox full');
    await deliverBounce(
      dmarc.returnPath,
      dmarc.email,
      '5.7.26',
      "550-5.7.26 Unauthenticated email from agents.example is not accepted due to domain's DMARC policy.",
    );
    await deliverBounce(
      blocked.returnPath,
      blocked.email,
      '5.7.606',
      '550 5.7.606 Access denied, banned sending IP [192.0.2.1]. To request removal from this list please visit https://sender.office.com/',
    );

    const reporting = (await readEmail(s, email.id)).reporting;
    assert.deepEqual([reporting.bounce, reporting.hard_bounce, reporting.soft_bounce, reporting.reply], [3, 0, 3, 0]);
    const listed = (await s.api.get(`/v3/templated_emails/${email.id}/deliveries?per_page=100`)).body.data as {
      id: number;
      state: string;
      outcome: { classification: string; permanent: boolean; code: string; description: string; source: string } | null;
    }[];
    const outcomeOf = (deliveryId: number) => {
      const d = listed.find((x) => x.id === deliveryId);
      assert.equal(d?.state, 'bounced');
      return d?.outcome;
    };
    assert.deepEqual(
      [full, dmarc, blocked].map((p) => {
        const o = outcomeOf(p.deliveryId);
        return [o?.classification, o?.permanent, o?.code, o?.source];
      }),
      [
        ['mailbox_full', false, '5.2.2', 'dsn'],
        ['auth_failure', false, '5.7.26', 'dsn'],
        ['blocked', false, '5.7.606', 'dsn'],
      ],
    );
    assert.match(outcomeOf(dmarc.deliveryId)?.description ?? '', /DMARC policy/);
    for (const p of [full, dmarc, blocked]) {
      const c = await contact(p.contactId);
      assert.equal(c.status, 'Subscribed');
      assert.equal(c.email_suppression, null);
    }
    // The delivery.bounced webhook carries the same outcome.
    await waitFor('three delivery.bounced webhooks', () => receiver.received.length >= 3);
    const hooks = receiver.received.map((r) => JSON.parse(r.body));
    const hook = hooks.find((h) => h.data.id === dmarc.deliveryId);
    assert.equal(hook?.type, 'delivery.bounced');
    assert.equal(hook?.data.outcome.classification, 'auth_failure');
    assert.equal(hook?.data.outcome.code, '5.7.26');
  });

  test('three soft bounces in 7 days retire the address as Inactive - Repeated Soft Bounce, saying why; older ones do not count; lifted in bulk', async () => {
    const people = await audience(s, 1);
    const [person] = people.contacts as [Audience['contacts'][0]];
    const emails: Awaited<ReturnType<typeof send>>[] = [];
    for (let i = 0; i < 4; i++) emails.push(await send(people));
    const at = (i: number) => (emails[i]?.to[0] as { returnPath: string; deliveryId: number }) ?? assert.fail();

    await deliverBounce(at(0).returnPath, person.email, '4.2.2', '452 4.2.2 Mailbox full');
    offset += 8 * 86_400_000; // eight days later: the first bounce is out of the window
    await deliverBounce(at(1).returnPath, person.email, '5.2.2', '552 5.2.2 Mailbox full');
    await deliverBounce(at(2).returnPath, person.email, '5.7.1', '550 5.7.1 Message rejected as spam by Content Filtering');
    assert.equal((await contact(person.id)).status, 'Subscribed', 'two soft bounces in 7 days');
    await deliverBounce(at(3).returnPath, person.email, '5.2.2', '552 5.2.2 Mailbox full');
    offset = 0; // the engine schedules by the clock: later sends go back to the present

    const retired = await contact(person.id);
    assert.equal(retired.status, 'Inactive - Repeated Soft Bounce');
    assert.equal(retired.email_suppression.reason, 'repeated_soft_bounce');
    assert.equal(retired.email_suppression.delivery_id, at(3).deliveryId);
    assert.match(retired.email_suppression.description, /^3 soft bounces in 7 days, the last: 552 5\.2\.2 Mailbox full/);
    assert.match(retired.email_suppression.at, /^\d{4}-\d\d-\d\dT/);

    const lift = await s.api.post(`/v3/users/${s.owner}/suppressions/lift`, { channel: 'email', reasons: ['repeated_soft_bounce'] });
    assert.equal(lift.status, 200, lift.raw);
    assert.equal(lift.body.lifted, 1);
    assert.equal((await contact(person.id)).status, 'Subscribed');
  });

  test('a bounce at a reply address is kept and counts for nothing; a person’s message at a bounce address is not a reply', async () => {
    const people = await audience(s, 2);
    const email = await send(people);
    const [dead, other] = email.to as [(typeof email.to)[0], (typeof email.to)[0]];
    const forwards = s.sink.to(AGENT).length;
    // An old sendmail bounce, no MIME at all, sent to the Reply-To address.
    await client(s.port).sendMail({
      envelope: { from: '', to: dead.replyTo },
      raw: [
        'From: Mail Delivery Subsystem <MAILER-DAEMON@mx.example.net>',
        `To: ${dead.replyTo}`,
        'Subject: Returned mail: User unknown',
        'Message-ID: <classic-1@mx.example.net>',
        '',
        '   ----- Transcript of session follows -----',
        `... while talking to mx.example.org.:`,
        `>>> RCPT To:<${dead.email}>`,
        `<<< 550 5.1.1 <${dead.email}>... User unknown`,
        `550 ${dead.email}... User unknown`,
        '',
      ].join('\r\n'),
    });
    // A person writes to the envelope sender.
    await client(s.port).sendMail({
      from: other.email,
      to: other.returnPath,
      subject: 'Re: A question for you',
      text: 'Yes, call me!',
      messageId: `<p-${randomBytes(4).toString('hex')}@mail.example>`,
    });
    const reporting = (await readEmail(s, email.id)).reporting;
    // Anyone the contact's reply reaches can write to the Reply-To address: a bounce there is
    // kept as one, and only the bounce (VERP) address's counts (issue 36, finding 6).
    assert.deepEqual([reporting.reply, reporting.hard_bounce, reporting.bounce], [0, 0, 0]);
    assert.equal((await contact(dead.contactId)).status, 'Subscribed');
    const stored = await s.t.database.db
      .selectFrom('inbound_messages')
      .select('kind')
      .where('recipient', '=', dead.replyTo.toLowerCase())
      .execute();
    assert.deepEqual(
      stored.map((m) => m.kind),
      ['bounce'],
    );
    assert.equal((await contact(other.contactId)).status, 'Subscribed');
    const kept = (await s.api.get(`/v3/templated_emails/${email.id}/replies`)).body;
    assert.equal(kept.meta.total, 1);
    assert.equal(kept.data[0].contact_id, other.contactId);
    assert.equal(kept.data[0].auto_reply, true, 'kept like an automatic reply: not counted, not forwarded');
    assert.equal(s.sink.to(AGENT).length, forwards);
  });
});
