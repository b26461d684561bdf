import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { SmtpPool } from '../../src/email/smtp-pool.ts';
import { createMailTransport } from '../../src/email/transport.ts';
import { systemClock } from '../../src/time.ts';
import {
  audience,
  createEmail,
  deliveriesOf,
  handedOver,
  readEmail,
  reasonOf,
  type SendingApp,
  startSendingApp,
  toTag,
  waitForStatus,
} from '../sending/support/sending-app.ts';
import { startSmtpSink } from '../sending/support/smtp-sink.ts';
import { waitFor } from '../sending/support/wait.ts';

/**
 * What the SMTP server answers decides a delivery's fate: 4xx is retried (counted as deferred),
 * 5xx for an address bounces it and retires the contact, a slow server can be cancelled under.
 * One SMTP connection and 200 ms retries, so each case is quick and the order of events is plain.
 */
describe('sending engine: SMTP replies, retries and cancel', () => {
  let s: SendingApp;
  before(async () => {
    // The relay's back-off from 100 ms (1 s by default): three 421s in a row wait 0.35-0.7 s, not 3.5-7 s.
    s = await startSendingApp({ SMTP_MAX_CONNECTIONS: '1', SEND_RETRY_BASE: '200ms', SMTP_BACKOFF_BASE: '100ms' });
  });
  after(() => s.close());

  test('421 (temporarily unavailable) then recovery: delivered after the relay back-off, each refusal counted as deferred', async () => {
    const people = await audience(s, 2);
    let refusals = 3;
    s.sink.behave({ mailFrom: () => (refusals-- > 0 ? { code: 421, message: 'Try again later' } : undefined) });
    try {
      const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
      const sent = await waitForStatus(s, email.id, ['Sent', 'Failed']);
      assert.equal(sent.status, 'Sent');
      assert.equal(sent.reporting.deferred, 3, 'every 421 is one deferral');
      assert.equal(sent.reporting.sent, 2);
      assert.equal(handedOver(sent.reporting), 2);
      for (const contact of people.contacts) assert.equal(s.sink.to(contact.email).length, 1);
      const deliveries = await deliveriesOf(s, email.id);
      assert.equal(
        deliveries.reduce((n, d) => n + d.attempts, 0),
        2,
        'a relay asking to slow down (421) uses up no attempt: one each, the one that went through',
      );
      assert.ok(deliveries.every((d) => d.state === 'sent' && d.last_error === null));
    } finally {
      s.sink.behave({});
    }
  });

  test('a contact who unsubscribes while their delivery waits for a retry is not emailed: the delivery is cancelled', async () => {
    const people = await audience(s, 2);
    const leaving = people.contacts[0]!;
    // The leaving contact's address is refused (421) until they have unsubscribed; "in 1 second" holds
    // the retry a whole second (not this app's 100 ms back-off), so the unsubscribe lands before it.
    let unsubscribed = false;
    s.sink.behave({
      recipient: (address) => (address === leaving.email && !unsubscribed ? { code: 421, message: 'Try again in 1 second' } : undefined),
    });
    try {
      const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
      await waitFor('a deferral of the leaving contact', async () => (await readEmail(s, email.id)).reporting.deferred > 0);
      const put = await s.api.put(`/v3/contacts/${leaving.id}`, { status: 'Unsubscribed' });
      assert.equal(put.status, 200, put.raw);
      unsubscribed = true;
      const done = await waitForStatus(s, email.id, ['Sent', 'Failed']);
      assert.equal(done.status, 'Sent');
      assert.equal(done.reporting.sent, 1, 'only the contact who stayed was emailed');
      assert.equal(s.sink.to(leaving.email).length, 0, 'nothing reached the contact who left');
      const deliveries = await deliveriesOf(s, email.id);
      const cancelled = deliveries.find((d) => d.contact_id === leaving.id);
      assert.equal(cancelled?.state, 'cancelled');
      assert.match(String(cancelled?.last_error), /Unsubscribed/);
    } finally {
      s.sink.behave({});
    }
  });

  test('550 for one address: that delivery bounces and its contact becomes Inactive - Hard Bounce; the others go out', async () => {
    const people = await audience(s, 3);
    const rejected = people.contacts[1]!;
    s.sink.behave({ recipient: (address) => (address === rejected.email ? { code: 550, message: '5.1.1 No such user' } : undefined) });
    try {
      const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
      const sent = await waitForStatus(s, email.id, ['Sent', 'Failed']);
      assert.equal(sent.status, 'Sent');
      assert.deepEqual(
        {
          sent: sent.reporting.sent,
          failed: sent.reporting.failed,
          bounce: sent.reporting.bounce,
          hard_bounce: sent.reporting.hard_bounce,
        },
        { sent: 2, failed: 1, bounce: 1, hard_bounce: 1 },
      );
      assert.equal(handedOver(sent.reporting), 3);
      const deliveries = await deliveriesOf(s, email.id);
      const bounced = deliveries.find((d) => d.contact_id === rejected.id)!;
      assert.equal(bounced.state, 'bounced');
      assert.match(bounced.last_error ?? '', /No such user/);
      assert.equal(bounced.attempts, 1, 'a permanent refusal is not retried');
      assert.equal((await s.api.get(`/v3/contacts/${rejected.id}`)).body.status, 'Inactive - Hard Bounce');
      assert.equal((await s.api.get(`/v3/contacts/${people.contacts[0]!.id}`)).body.status, 'Subscribed');
      assert.equal(s.sink.to(rejected.email).length, 0);
      assert.equal(s.sink.to(people.contacts[2]!.email).length, 1);
    } finally {
      s.sink.behave({});
    }
  });

  test('a DMARC refusal, a block and a full mailbox are soft bounces: counted in soft_bounce with their reason, the contacts stay', async () => {
    const people = await audience(s, 3);
    const [dmarc, blocked, full] = people.contacts as [
      (typeof people.contacts)[0],
      (typeof people.contacts)[0],
      (typeof people.contacts)[0],
    ];
    const answers = new Map([
      [
        dmarc.email,
        { code: 550, message: "5.7.26 Unauthenticated email from agents.example is not accepted due to domain's DMARC policy" },
      ],
      [blocked.email, { code: 550, message: '5.7.606 Access denied, banned sending IP [192.0.2.1]' }],
      [full.email, { code: 552, message: '5.2.2 Mailbox full' }],
    ]);
    s.sink.behave({ recipient: (address) => answers.get(address) });
    try {
      const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
      const done = await waitForStatus(s, email.id, ['Sent', 'Failed']);
      const r = done.reporting;
      assert.deepEqual([r.failed, r.bounce, r.hard_bounce, r.soft_bounce], [3, 3, 0, 3]);
      const listed = (await s.api.get(`/v3/templated_emails/${email.id}/deliveries`)).body.data as {
        contact_id: number;
        state: string;
        outcome: { classification: string; permanent: boolean; code: string; source: string };
      }[];
      const outcome = (id: number) => {
        const d = listed.find((x) => x.contact_id === id);
        assert.equal(d?.state, 'bounced');
        return [d?.outcome.classification, d?.outcome.permanent, d?.outcome.code, d?.outcome.source];
      };
      assert.deepEqual(outcome(dmarc.id), ['auth_failure', false, '5.7.26', 'smtp']);
      assert.deepEqual(outcome(blocked.id), ['blocked', false, '5.7.606', 'smtp']);
      assert.deepEqual(outcome(full.id), ['mailbox_full', false, '5.2.2', 'smtp']);
      for (const c of people.contacts) assert.equal((await s.api.get(`/v3/contacts/${c.id}`)).body.status, 'Subscribed');
    } finally {
      s.sink.behave({});
    }
  });

  test('the relay refusing one address softly three times in 7 days: Inactive - Repeated Soft Bounce, saying why', async () => {
    const people = await audience(s, 1);
    const [person] = people.contacts as [(typeof people.contacts)[0]];
    s.sink.behave({ recipient: (address) => (address === person.email ? { code: 552, message: '5.2.2 Mailbox full' } : undefined) });
    try {
      for (let i = 1; i <= 3; i++) {
        assert.equal((await s.api.get(`/v3/contacts/${person.id}`)).body.status, 'Subscribed', `before email ${i}`);
        const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
        await waitForStatus(s, email.id, ['Sent', 'Failed']);
      }
      const retired = (await s.api.get(`/v3/contacts/${person.id}`)).body;
      assert.equal(retired.status, 'Inactive - Repeated Soft Bounce');
      assert.equal(retired.email_suppression.reason, 'repeated_soft_bounce');
      assert.match(retired.email_suppression.description, /^3 soft bounces in 7 days, the last: 552 5\.2\.2 Mailbox full/);
    } finally {
      s.sink.behave({});
    }
  });

  test('every address refused: Failed, "Every delivery failed."', async () => {
    const people = await audience(s, 2);
    s.sink.behave({ recipient: () => ({ code: 554, message: 'Transaction failed' }) });
    try {
      const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
      const failed = await waitForStatus(s, email.id, ['Sent', 'Failed']);
      assert.equal(failed.status, 'Failed');
      assert.equal(await reasonOf(s, email.id), 'Every delivery failed.');
      assert.equal(failed.reporting.failed, 2);
      assert.equal(handedOver(failed.reporting), 2);
      // 554 is no statement about the address: the contacts stay as they were.
      assert.equal((await s.api.get(`/v3/contacts/${people.contacts[0]!.id}`)).body.status, 'Subscribed');
    } finally {
      s.sink.behave({});
    }
  });

  test('cancel while Sending on a slow server: nothing more goes out, the message stays Cancelled', async (t) => {
    const people = await audience(s, 30);
    s.sink.behave({ delayMs: 100 });
    try {
      const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
      const ours = () => s.sink.messages.filter((m) => m.messageId.startsWith(`<templated_email-${email.id}.`)).length;
      await waitFor('a few emails to go out', () => ours() >= 5);
      const cancelled = await s.api.put(`/v3/templated_emails/${email.id}`, { status: 'Cancelled' });
      assert.equal(cancelled.status, 200, cancelled.raw);
      const atCancel = ours();

      // Settled: no delivery is being sent any more.
      const deliveries = await waitFor('the deliveries to settle', async () => {
        const rows = await deliveriesOf(s, email.id);
        return rows.every((d) => d.state === 'sent' || d.state === 'cancelled') && rows;
      });
      const sentRows = deliveries.filter((d) => d.state === 'sent');
      // What the one connection had in hand, and what started before the engine saw the cancel
      // (it looks every 250 ms; a message takes 100 ms): at most a few.
      t.diagnostic(`emails out when cancelled: ${atCancel}; after: ${ours() - atCancel}; not sent: ${30 - ours()}`);
      assert.ok(ours() - atCancel <= 5, `${ours() - atCancel} emails went out after the cancel`);
      assert.ok(sentRows.length < 30, 'the send stopped');
      assert.equal(ours(), sentRows.length, 'every email that went out is recorded as sent');
      const message = await readEmail(s, email.id);
      assert.equal(message.status, 'Cancelled');
      assert.equal(message.reporting.sent, sentRows.length);
      assert.equal(deliveries.length - sentRows.length, deliveries.filter((d) => d.state === 'cancelled').length);
    } finally {
      s.sink.behave({});
    }
  });
});

describe('SMTP pool', () => {
  test('a connection the server closed while idle is replaced: the next message goes out', async () => {
    const sink = await startSmtpSink();
    const pool = new SmtpPool({
      url: sink.url,
      name: 'hopper.test',
      maxConnections: 1,
      rateLimit: 0,
      connectionTimeout: 2000,
      greetingTimeout: 2000,
      socketTimeout: 5000,
    });
    try {
      const raw = (n: number) =>
        `From: a@example.test\r\nTo: b@example.test\r\nMessage-ID: <pool-${n}@example.test>\r\nSubject: ${n}\r\n\r\nHello\r\n`;
      await pool.send({ from: 'a@example.test', to: ['b@example.test'] }, raw(1));
      await sink.closeConnections();
      await pool.send({ from: 'a@example.test', to: ['b@example.test'] }, raw(2));
      assert.deepEqual(
        sink.messages.map((m) => m.messageId),
        ['<pool-1@example.test>', '<pool-2@example.test>'],
      );
    } finally {
      pool.close();
      await sink.close();
    }
  });

  test('at most SMTP_RATE_LIMIT messages start per second', async () => {
    const sink = await startSmtpSink();
    const pool = new SmtpPool({
      url: sink.url,
      name: 'hopper.test',
      maxConnections: 3,
      rateLimit: 10,
      connectionTimeout: 2000,
      greetingTimeout: 2000,
      socketTimeout: 5000,
    });
    try {
      const started = Date.now();
      await Promise.all(
        Array.from({ length: 11 }, (_, n) =>
          pool.send({ from: 'a@example.test', to: ['b@example.test'] }, `Message-ID: <rate-${n}@example.test>\r\n\r\nHello\r\n`),
        ),
      );
      // 10 in the first second, the 11th in the second.
      assert.ok(Date.now() - started >= 1000, `11 messages at 10 a second took ${Date.now() - started} ms`);
      assert.equal(sink.messages.length, 11);
    } finally {
      pool.close();
      await sink.close();
    }
  });
});

describe('mail transport: addresses the fast path does not compose', () => {
  test('a VERP envelope to an IDN, UTF-8 or quoted address keeps its recipient; SMTPUTF8 where the address needs it', async () => {
    const sink = await startSmtpSink();
    const transport = createMailTransport(
      loadConfig({ SMTP_URL: sink.url, PUBLIC_URL: 'https://hopper.test', MAIL_FROM: 'Hopper <mail@hopper.test>', DATA_DIR: '/tmp' }),
      systemClock,
    );
    try {
      for (const [i, [to, accepted, smtpUtf8]] of [
        // The domain travels as its A-label (no SMTPUTF8 needed); smtp-server shows it decoded.
        ['maria@müller.example', 'maria@müller.example', false],
        ['josé@correo.example', 'josé@correo.example', true],
        // (smtp-server, the sink, cannot parse a quoted local part holding a space: "ann smith"@…)
        ['"ann(smith)"@client.example', '"ann(smith)"@client.example', false],
      ].entries()) {
        const outcome = await transport.send(
          {
            messageId: `<intl-${i}@hopper.test>`,
            from: { name: 'Jane', address: 'jane@hopper.test' },
            envelope: { from: 'b-token@in.hopper.test' },
            to: to as string,
            subject: 'Hello',
            text: 'Hello',
            html: '<p>Hello</p>',
          },
          i + 1,
        );
        assert.equal(outcome.kind, 'sent', `${to}: ${JSON.stringify(outcome)}`);
        const [message] = sink.messages.filter((m) => m.messageId === `<intl-${i}@hopper.test>`);
        assert.ok(message, to as string);
        assert.deepEqual(message.to, [accepted], to as string);
        assert.equal(message.from, 'b-token@in.hopper.test');
        assert.equal(message.smtpUtf8, smtpUtf8, to as string);
      }
    } finally {
      transport.close();
      await sink.close();
    }
  });

  test("every message's Date header is the clock's: composed here or by nodemailer, sent, forwarded or written to the outbox", async () => {
    const clock = () => new Date('2030-01-01T00:00:00Z');
    const stamped = /^Date: Tue, 01 Jan 2030 00:00:00 \+0000$/m;
    const email = (to: string, n: number) => ({
      messageId: `<clock-${n}@hopper.test>`,
      from: 'jane@hopper.test',
      to,
      subject: 'Hello',
      text: 'Hello',
      html: '<p>Hello</p>',
    });
    const sink = await startSmtpSink();
    const settings = { PUBLIC_URL: 'https://hopper.test', MAIL_FROM: 'Hopper <mail@hopper.test>' };
    const smtp = createMailTransport(loadConfig({ ...settings, SMTP_URL: sink.url, DATA_DIR: '/tmp' }), clock);
    const dataDir = await mkdtemp(join(tmpdir(), 'hopper-outbox-'));
    const outbox = createMailTransport(loadConfig({ ...settings, DATA_DIR: dataDir }), clock);
    try {
      // A plain address takes compose-mime.ts's path; a UTF-8 one nodemailer's.
      assert.equal((await smtp.send(email('ann@client.example', 1), 1)).kind, 'sent');
      assert.equal((await smtp.send(email('josé@correo.example', 2), 2)).kind, 'sent');
      await smtp.forward(email('ann@client.example', 3), 'forward');
      for (const n of [1, 2, 3]) {
        const message = sink.messages.find((m) => m.messageId === `<clock-${n}@hopper.test>`);
        assert.match(message?.raw ?? '', stamped, `message ${n}`);
      }
      await outbox.send(email('ann@client.example', 4), 4);
      assert.match(await readFile(join(dataDir, 'outbox/4.eml'), 'utf8'), stamped);
    } finally {
      smtp.close();
      outbox.close();
      await sink.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
