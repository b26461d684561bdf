import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { apiTime, createTag } from '../messages/fixtures.ts';
import { parseEmail } from './support/mime.ts';
import {
  type Audience,
  audience,
  createEmail,
  deliveriesOf,
  handedOver,
  readEmail,
  reasonOf,
  type SendingApp,
  startSendingApp,
  toTag,
  waitForDueJobs,
  waitForStatus,
} from './support/sending-app.ts';

/**
 * The sending engine end to end: messages made through the API, sent by the in-process engine
 * over SMTP to a real SMTP server on loopback, checked at the server and in the delivery ledger.
 */
describe('sending engine: scheduling, recipients and rendering over SMTP', () => {
  let s: SendingApp;
  before(async () => {
    s = await startSendingApp();
  });
  after(() => s.close());

  test('Now: every recipient gets one email with the Message-ID of its delivery; Sent; sent + failed = deliveries', async () => {
    const people = await audience(s, 3);
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    assert.equal(email.send_type, 'Now');
    const sent = await waitForStatus(s, email.id, ['Sent']);
    assert.equal(await reasonOf(s, email.id), null);
    assert.ok(sent.sending_at && sent.sent_at && sent.sent_at >= sent.sending_at);

    const deliveries = await deliveriesOf(s, email.id);
    assert.equal(deliveries.length, 3);
    assert.equal(handedOver(sent.reporting), deliveries.length);
    assert.equal(sent.reporting.sent, 3);
    for (const delivery of deliveries) {
      assert.equal(delivery.state, 'sent');
      assert.equal(delivery.attempts, 1);
      const received = s.sink.messages.filter((m) => m.messageId === delivery.provider_message_id);
      assert.equal(received.length, 1, `one email for delivery ${delivery.id}`);
      assert.deepEqual(received[0]!.to, [delivery.address]);
    }
    assert.deepEqual(new Set(deliveries.map((d) => d.contact_id)), new Set(people.contacts.map((c) => c.id)));
  });

  // Each waits for its send time: they run side by side, each with its own contacts.
  describe('send times', { concurrency: true }, () => {
    test('Future: nothing goes out before send_at; then it sends once', async () => {
      const people = await audience(s, 2);
      const sendAt = apiTime(2500);
      const email = await createEmail(s, { status: 'Scheduled', send_type: 'Future', send_at: sendAt, recipients: toTag(people) });
      assert.equal((await readEmail(s, email.id)).status, 'Scheduled');
      const sent = await waitForStatus(s, email.id, ['Sent']);
      assert.ok(Date.parse(sent.sending_at) >= Date.parse(sendAt), `sending_at ${sent.sending_at} is not before send_at ${sendAt}`);
      for (const contact of people.contacts) {
        const received = s.sink.to(contact.email);
        assert.equal(received.length, 1);
        assert.ok(received[0]!.at >= Date.parse(sendAt), 'delivered no earlier than send_at');
      }
    });

    test('unschedule: set back to Saved before it is due, it never sends', async () => {
      const people = await audience(s, 2);
      const email = await createEmail(s, { status: 'Scheduled', send_type: 'Future', send_at: apiTime(2000), recipients: toTag(people) });
      const saved = await s.api.put(`/v3/templated_emails/${email.id}`, { status: 'Saved' });
      assert.equal(saved.status, 200, saved.raw);
      await waitForDueJobs(s, email.id);
      const after = await readEmail(s, email.id);
      assert.equal(after.status, 'Saved');
      assert.equal(after.sending_at, null);
      assert.equal((await deliveriesOf(s, email.id)).length, 0);
      for (const contact of people.contacts) assert.equal(s.sink.to(contact.email).length, 0);
    });

    test('reschedule: a new send_at sends once, at the new time', async () => {
      const people = await audience(s, 2);
      const email = await createEmail(s, { status: 'Scheduled', send_type: 'Future', send_at: apiTime(2000), recipients: toTag(people) });
      const later = apiTime(4000);
      const moved = await s.api.put(`/v3/templated_emails/${email.id}`, { send_at: later });
      assert.equal(moved.status, 200, moved.raw);
      assert.equal(moved.body.send_at, later);
      const sent = await waitForStatus(s, email.id, ['Sent']);
      await waitForDueJobs(s, email.id);
      assert.ok(Date.parse(sent.sending_at) >= Date.parse(later));
      for (const contact of people.contacts) {
        const received = s.sink.to(contact.email);
        assert.equal(received.length, 1, 'the job of the old time did nothing');
        assert.ok(received[0]!.at >= Date.parse(later));
      }
      assert.equal((await deliveriesOf(s, email.id)).length, 2);
    });

    test('delete while scheduled: it never sends', async () => {
      const people = await audience(s, 2);
      const email = await createEmail(s, { status: 'Scheduled', send_type: 'Future', send_at: apiTime(2000), recipients: toTag(people) });
      assert.equal((await s.api.delete(`/v3/templated_emails/${email.id}`)).status, 200);
      await waitForDueJobs(s, email.id);
      assert.equal((await deliveriesOf(s, email.id)).length, 0);
      for (const contact of people.contacts) assert.equal(s.sink.to(contact.email).length, 0);
    });
  });

  test('a draft never sends, while a scheduled email to the same people does', async () => {
    const people = await audience(s, 2);
    const draft = await createEmail(s, { recipients: toTag(people) });
    assert.equal(draft.status, 'Saved');
    const sending = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    await waitForStatus(s, sending.id, ['Sent']);
    assert.equal((await readEmail(s, draft.id)).status, 'Saved');
    assert.equal((await deliveriesOf(s, draft.id)).length, 0);
    for (const contact of people.contacts) assert.equal(s.sink.to(contact.email).length, 1);
  });

  test('exclusions: an excluded tag or contact gets nothing; a contact named twice gets one email', async () => {
    const people = await audience(s, 4);
    const [first, second, third, fourth] = people.contacts as [Audience['contacts'][number], ...Audience['contacts']];
    const vip = await createTag(s.t, { id: s.owner }, `vip-${people.tag.name}`);
    assert.equal((await s.api.put(`/v3/contacts/${first.id}`, { tags: [people.tag.name, vip.name] })).status, 200);
    const email = await createEmail(s, {
      status: 'Scheduled',
      recipients: [...toTag(people), { group: 'Contacts', value: third!.id }],
      exclusions: [
        { group: 'Tags', value: vip.id },
        { group: 'Contacts', value: second!.id },
      ],
    });
    const sent = await waitForStatus(s, email.id, ['Sent']);
    const deliveries = await deliveriesOf(s, email.id);
    assert.deepEqual(deliveries.map((d) => d.contact_id).sort(), [third!.id, fourth!.id].sort());
    assert.equal(sent.reporting.sent, 2);
    assert.equal(s.sink.to(first.email).length, 0);
    assert.equal(s.sink.to(second!.email).length, 0);
    assert.equal(s.sink.to(third!.email).length, 1);
  });

  test('unsubscribed, bounced and complaining contacts are skipped', async () => {
    const statuses = ['Subscribed', 'Unsubscribed', 'Inactive - Hard Bounce', 'Inactive - Spam Complaint', 'Subscribed'];
    const people = await audience(s, statuses.length, (i) => ({ status: statuses[i] }));
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    const sent = await waitForStatus(s, email.id, ['Sent']);
    const deliveries = await deliveriesOf(s, email.id);
    const subscribed = people.contacts.filter((c) => c.status === 'Subscribed');
    assert.deepEqual(deliveries.map((d) => d.contact_id).sort(), subscribed.map((c) => c.id).sort());
    assert.equal(handedOver(sent.reporting), 2);
    for (const contact of people.contacts) assert.equal(s.sink.to(contact.email).length, contact.status === 'Subscribed' ? 1 : 0);
  });

  test('no one can receive it: Failed, with the reason', async () => {
    const people = await audience(s, 2, () => ({ status: 'Unsubscribed' }));
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    const failed = await waitForStatus(s, email.id, ['Failed', 'Sent']);
    assert.equal(failed.status, 'Failed');
    // Templated emails carry no `reason` in the API (the specification gives them none); it is stored.
    assert.match((await reasonOf(s, email.id)) ?? '', /no recipient/i);
    assert.ok(failed.sent_at);
    assert.equal(handedOver(failed.reporting), 0);
  });

  test('rendering: greeting with and without a first name, merge tags escaped in HTML, a text and an HTML part', async () => {
    const people = await audience(
      s,
      3,
      (i) => [{ first_name: 'Ann <b>&"', last_name: "O'Neil" }, { first_name: null, last_name: 'Smith' }, { first_name: 'José' }][i]!,
    );
    const email = await createEmail(s, {
      status: 'Scheduled',
      recipients: toTag(people),
      subject: 'For {{first_name}} {{ last_name }}',
      greeting_with_first_name: 'Dear {{first_name}},',
      greeting_without_first_name: 'Hello there,',
      body: '<p>News for {{full_name}}: <a href="https://example.com/listing">the listing</a></p>',
      closing: 'Best,',
      ps_line: 'Bring {{first_name}} along.',
    });
    await waitForStatus(s, email.id, ['Sent']);
    const [ann, smith, jose] = people.contacts.map((c) => {
      const received = s.sink.to(c.email);
      assert.equal(received.length, 1);
      assert.equal(received[0]!.helo, 'hopper.test', "EHLO names PUBLIC_URL's host");
      return parseEmail(received[0]!.raw);
    }) as [ReturnType<typeof parseEmail>, ReturnType<typeof parseEmail>, ReturnType<typeof parseEmail>];

    for (const mail of [ann, smith, jose]) {
      assert.deepEqual(mail.parts.map((p) => p.contentType).sort(), ['text/html', 'text/plain']);
      assert.equal(mail.contentType, 'multipart/alternative');
      assert.match(mail.headers.get('list-unsubscribe') ?? '', /^<https:\/\/hopper\.test\/unsubscribe\/[\w-]+>, <mailto:/);
      assert.equal(mail.headers.get('list-unsubscribe-post'), 'List-Unsubscribe=One-Click');
      // The sink is no relay of SendGrid's or Postmark's: neither's header goes out.
      assert.ok(!mail.headers.has('x-smtpapi') && !mail.headers.has('x-pm-metadata-hopper_delivery_id'));
      assert.match(mail.headers.get('feedback-id') ?? '', /^m\d+:u\d+:templated_email:hopper\.test$/);
      assert.match(mail.headers.get('date') ?? '', /^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} \+0000$/);
    }
    // With a first name: that greeting, the name escaped in HTML and as it is in text and subject.
    assert.equal(ann.headers.get('subject'), `For Ann <b>&" O'Neil`);
    assert.match(ann.html!, /<p>Dear Ann &lt;b&gt;&amp;&quot;,<\/p>/);
    assert.match(ann.html!, /News for Ann &lt;b&gt;&amp;&quot; O&#39;Neil:/);
    assert.doesNotMatch(ann.html!, /<b>&"/);
    assert.match(ann.text!, /^Dear Ann <b>&",/);
    assert.match(ann.text!, /P\.S\. Bring Ann <b>&" along\./);
    // Without one: the other greeting, and empty merge values.
    assert.match(smith.html!, /<p>Hello there,<\/p>/);
    assert.match(smith.text!, /^Hello there,/);
    assert.match(smith.text!, /News for Smith:/);
    // Non-ASCII survives the trip (RFC 2047 subject, quoted-printable parts).
    assert.equal(jose.headers.get('subject'), 'For José ');
    assert.match(jose.text!, /^Dear José,/);
    assert.match(jose.html!, /Dear José,/);
    // Links go through the click redirect in HTML and stay as they are in text.
    assert.match(ann.html!, /href="https:\/\/hopper\.test\/t\/c\/[\w-]+"/);
    assert.match(ann.text!, /https:\/\/example\.com\/listing/);
  });
});
