import assert from 'node:assert/strict';
import { sign } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { generate } from 'selfsigned';
import {
  audience,
  createEmail,
  deliveriesOf,
  readEmail,
  type SendingApp,
  TEST_POSTAL_ADDRESS,
  toTag,
  waitForStatus,
} from '../sending/support/sending-app.ts';
import { startSmtpSink } from '../sending/support/smtp-sink.ts';
import { asKey } from '../support/client.ts';
import { startTestApp } from '../support/test-app.ts';

/**
 * SES (through SNS, the message signature checked against a certificate made by the test and
 * served by the injected fetcher) and Postmark (basic credentials): bounces and complaints move
 * the same counters, deliveries and contacts as every other source.
 */
const CERT_URL = 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem';
const TOPIC = 'arn:aws:sns:us-east-1:123456789012:hopper-ses';

describe('SES and Postmark webhooks', () => {
  let s: SendingApp;
  let pems: { private: string; cert: string };
  let other: { private: string; cert: string };
  const fetched: string[] = [];
  let deliveries: { id: number; contact_id: number; address: string }[];
  let emailId: number;

  before(async () => {
    pems = await generate([{ name: 'commonName', value: 'sns.amazonaws.com' }], { keyType: 'rsa', keySize: 2048 });
    other = await generate([{ name: 'commonName', value: 'sns.amazonaws.com' }], { keyType: 'rsa', keySize: 2048 });
    const sink = await startSmtpSink();
    const t = await startTestApp({
      workers: true,
      env: {
        SMTP_URL: sink.url,
        MAIL_POSTAL_ADDRESS: TEST_POSTAL_ADDRESS,
        POSTMARK_WEBHOOK_USER: 'pm',
        POSTMARK_WEBHOOK_PASSWORD: 'secret-pw',
        SES_TOPIC_ARNS: TOPIC,
      },
      snsFetch: async (url) => {
        fetched.push(url);
        if (url === CERT_URL) return pems.cert;
        if (url.startsWith('https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription')) return '<ConfirmSubscriptionResponse/>';
        throw new Error(`unexpected fetch ${url}`);
      },
    });
    s = {
      t,
      sink,
      api: asKey(t.app, t.adminKey),
      owner: t.adminId,
      close: async () => {
        await t.close();
        await sink.close();
      },
    };
    const people = await audience(s, 4);
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    await waitForStatus(s, email.id, ['Sent']);
    emailId = email.id;
    deliveries = await deliveriesOf(s, email.id);
  });
  after(() => s.close());

  function snsMessage(fields: Record<string, string>, key = pems.private) {
    const message: Record<string, string> = {
      MessageId: 'b4d6c1a2-0000-4000-8000-000000000001',
      TopicArn: TOPIC,
      Timestamp: new Date().toISOString(),
      SignatureVersion: '2',
      SigningCertURL: CERT_URL,
      ...fields,
    };
    const keys =
      message.Type === 'Notification'
        ? ['Message', 'MessageId', ...(message.Subject !== undefined ? ['Subject'] : []), 'Timestamp', 'TopicArn', 'Type']
        : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
    const text = keys.map((k) => `${k}\n${message[k]}\n`).join('');
    message.Signature = sign('sha256', Buffer.from(text), key).toString('base64');
    return message;
  }

  const postSns = (body: unknown, contentType = 'text/plain; charset=UTF-8') =>
    s.t.app.inject({
      method: 'POST',
      url: '/v3/callbacks/ses',
      headers: { 'content-type': contentType },
      payload: typeof body === 'string' ? body : JSON.stringify(body),
    });

  const sesBounce = (d: { id: number; address: string }, bounceType: string, feedbackId: string) =>
    JSON.stringify({
      notificationType: 'Bounce',
      bounce: {
        bounceType,
        bounceSubType: 'General',
        feedbackId,
        timestamp: new Date().toISOString(),
        bouncedRecipients: [{ emailAddress: d.address, status: '5.1.1', diagnosticCode: 'smtp; 550 5.1.1 user unknown' }],
      },
      mail: { messageId: 'ses-id-1', commonHeaders: { messageId: `<templated_email-${emailId}.${d.id}@hopper.test>` } },
    });

  test('SES: a signed bounce notification is recorded once; a permanent bounce retires the contact', async () => {
    const d = deliveries[0]!;
    const message = snsMessage({ Type: 'Notification', Message: sesBounce(d, 'Permanent', 'fb-1') });
    for (let i = 0; i < 2; i++) {
      const reply = await postSns(message);
      assert.equal(reply.statusCode, 200, reply.body);
      assert.deepEqual(reply.json(), i === 0 ? { recorded: 1, duplicates: 0, ignored: 0 } : { recorded: 0, duplicates: 1, ignored: 0 });
    }
    const counters = (await readEmail(s, emailId)).reporting;
    assert.deepEqual([counters.bounce, counters.hard_bounce], [1, 1]);
    assert.equal((await s.api.get(`/v3/contacts/${d.contact_id}`)).body.status, 'Inactive - Hard Bounce');
    assert.deepEqual(fetched.filter((u) => u === CERT_URL).length, 1, 'the certificate is fetched once and kept');
  });

  test('SES: a complaint (JSON content type too) counts spamreport', async () => {
    const d = deliveries[1]!;
    const note = JSON.stringify({
      notificationType: 'Complaint',
      complaint: { feedbackId: 'fb-2', complainedRecipients: [{ emailAddress: d.address }], complaintFeedbackType: 'abuse' },
      mail: { commonHeaders: { messageId: `<templated_email-${emailId}.${d.id}@hopper.test>` } },
    });
    const reply = await postSns(snsMessage({ Type: 'Notification', Message: note, MessageId: 'm-2' }), 'application/json');
    assert.equal(reply.statusCode, 200, reply.body);
    assert.equal((await readEmail(s, emailId)).reporting.spamreport, 1);
    assert.equal((await s.api.get(`/v3/contacts/${d.contact_id}`)).body.status, 'Inactive - Spam Complaint');
  });

  test('SES: tampered, wrongly signed, off-SNS certificate URLs and other topics are refused', async () => {
    const d = deliveries[2]!;
    const good = snsMessage({ Type: 'Notification', Message: sesBounce(d, 'Permanent', 'fb-3'), MessageId: 'm-3' });
    const cases: [unknown, number][] = [
      [{ ...good, Message: sesBounce(deliveries[3]!, 'Permanent', 'fb-3') }, 403],
      [snsMessage({ Type: 'Notification', Message: sesBounce(d, 'Permanent', 'fb-3') }, other.private), 403],
      [{ ...good, SigningCertURL: 'https://evil.example/SimpleNotificationService-test.pem' }, 403],
      [{ ...good, SigningCertURL: 'https://sns.us-east-1.amazonaws.com.evil.example/x.pem' }, 403],
      [{ ...good, SigningCertURL: 'http://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem' }, 403],
      [snsMessage({ Type: 'Notification', Message: sesBounce(d, 'Permanent', 'fb-3'), TopicArn: 'arn:aws:sns:us-east-1:9:other' }), 403],
      [{ ...good, Signature: 42 }, 403],
      ['{not json', 400],
      [[], 403],
    ];
    for (const [body, status] of cases) {
      const reply = await postSns(body);
      assert.equal(reply.statusCode, status, `${JSON.stringify(body).slice(0, 120)}: ${reply.body}`);
    }
    assert.ok(!fetched.some((u) => u.includes('evil')), 'no certificate fetched off SNS hosts');
    assert.equal((await readEmail(s, emailId)).reporting.hard_bounce, 1, 'nothing refused was recorded');
  });

  test('SES: a delivery named only by its header (SES gave the message an id of its own) is found', async () => {
    const d = deliveries[1]!;
    const note = JSON.stringify({
      notificationType: 'Bounce',
      bounce: { bounceType: 'Transient', feedbackId: 'fb-h', bouncedRecipients: [{ emailAddress: d.address }] },
      mail: {
        commonHeaders: { messageId: '<0100018c-ses-own@email.amazonses.com>' },
        headers: [{ name: 'X-PM-Metadata-hopper_delivery_id', value: String(d.id) }],
      },
    });
    const reply = await postSns(snsMessage({ Type: 'Notification', Message: note, MessageId: 'm-h' }));
    assert.deepEqual(reply.json(), { recorded: 1, duplicates: 0, ignored: 0 });
  });

  test('SES: a transient bounce counts soft_bounce only; a subscription confirmation is confirmed on SNS', async () => {
    const d = deliveries[2]!;
    const reply = await postSns(snsMessage({ Type: 'Notification', Message: sesBounce(d, 'Transient', 'fb-4'), MessageId: 'm-4' }));
    assert.equal(reply.statusCode, 200, reply.body);
    const counters = (await readEmail(s, emailId)).reporting;
    assert.deepEqual([counters.bounce, counters.soft_bounce], [1, 2]);
    const subscribe = 'https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=x&Token=t0k';
    const confirmed = await postSns(
      snsMessage({ Type: 'SubscriptionConfirmation', Message: 'confirm', SubscribeURL: subscribe, Token: 't0k', MessageId: 'm-5' }),
    );
    assert.equal(confirmed.statusCode, 200, confirmed.body);
    assert.ok(fetched.includes(subscribe));
    const offHost = await postSns(
      snsMessage({
        Type: 'SubscriptionConfirmation',
        Message: 'confirm',
        SubscribeURL: 'https://evil.example/?Action=ConfirmSubscription',
        Token: 't',
        MessageId: 'm-6',
      }),
    );
    assert.equal(offHost.statusCode, 403, offHost.body);
  });

  test('Postmark: wrong credentials 401; a HardBounce and a SpamComplaint recorded once each', async () => {
    const d = deliveries[3]!;
    const post = (body: unknown, auth?: string) =>
      s.t.app.inject({
        method: 'POST',
        url: '/v3/webhooks/postmark',
        headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
        payload: JSON.stringify(body),
      });
    const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
    const bounce = {
      RecordType: 'Bounce',
      ID: 4323372036,
      Type: 'HardBounce',
      Email: d.address,
      BouncedAt: new Date().toISOString(),
      Description: 'The server was unable to deliver your message',
      Metadata: { hopper_delivery_id: String(d.id) },
    };
    for (const auth of [undefined, basic('pm', 'wrong'), basic('other', 'secret-pw'), 'Bearer secret-pw']) {
      const refused = await post(bounce, auth);
      assert.equal(refused.statusCode, 401, refused.body);
    }
    const good = basic('pm', 'secret-pw');
    assert.deepEqual((await post(bounce, good)).json(), { recorded: 1, duplicates: 0, ignored: 0 });
    assert.deepEqual((await post(bounce, good)).json(), { recorded: 0, duplicates: 1, ignored: 0 });
    const complaint = { RecordType: 'SpamComplaint', ID: 99, Email: d.address, Metadata: { hopper_delivery_id: String(d.id) } };
    assert.deepEqual((await post(complaint, good)).json(), { recorded: 1, duplicates: 0, ignored: 0 });
    for (const odd of [
      { RecordType: 'Delivery', ID: 5 },
      { RecordType: 'Bounce', ID: 6, Type: 'HardBounce', Metadata: { hopper_delivery_id: 'x' } },
    ]) {
      assert.deepEqual((await post(odd, good)).json(), { recorded: 0, duplicates: 0, ignored: 1 });
    }
    assert.equal((await post([bounce], good)).statusCode, 400);
    const counters = (await readEmail(s, emailId)).reporting;
    assert.deepEqual([counters.hard_bounce, counters.spamreport], [2, 2]);
  });
});
