import assert from 'node:assert/strict';
import { sign } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { generate } from 'selfsigned';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { assertProblem } from '../support/factories.ts';
import { startTestApp, type TestApp, testConfigEnv } from '../support/test-app.ts';

/**
 * Finding 9 of issue 36: with SES_TOPIC_ARNS empty, `POST /v3/callbacks/ses` accepted any topic
 * whose messages SNS signed — one an attacker creates in their own AWS account included, whose
 * notifications could then bounce any contact. The list is now required, as Postmark's
 * credentials and SendGrid's key are: without it every post is refused (503
 * `webhook_not_configured`, so SNS keeps retrying until the operator sets it).
 */
const CERT_URL = 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-attacker.pem';
const ATTACKER_TOPIC = 'arn:aws:sns:us-east-1:999999999999:not-yours';

describe('SES callbacks need SES_TOPIC_ARNS', () => {
  let t: TestApp;
  let pems: { private: string; cert: string };
  const fetched: string[] = [];
  before(async () => {
    pems = await generate([{ name: 'commonName', value: 'sns.amazonaws.com' }], { keyType: 'rsa', keySize: 2048 });
    t = await startTestApp({
      snsFetch: async (url) => {
        fetched.push(url);
        if (url === CERT_URL) return pems.cert;
        throw new Error(`unexpected fetch ${url}`);
      },
    });
  });
  after(() => t?.close());

  /** A notification SNS really signed (the certificate is the one SNS's URL serves), of a topic nobody configured. */
  function signedNotification() {
    const message: Record<string, string> = {
      Type: 'Notification',
      MessageId: 'f00dfeed-0000-4000-8000-000000000001',
      TopicArn: ATTACKER_TOPIC,
      Message: JSON.stringify({
        notificationType: 'Complaint',
        complaint: { complainedRecipients: [{ emailAddress: 'ann@example.com' }] },
      }),
      Timestamp: new Date().toISOString(),
      SignatureVersion: '2',
      SigningCertURL: CERT_URL,
    };
    const text = ['Message', 'MessageId', 'Timestamp', 'TopicArn', 'Type'].map((k) => `${k}\n${message[k]}\n`).join('');
    message.Signature = sign('sha256', Buffer.from(text), pems.private).toString('base64');
    return message;
  }

  test('without SES_TOPIC_ARNS a signed notification of any topic is refused, unread', async () => {
    const reply = await t.app.inject({
      method: 'POST',
      url: '/v3/callbacks/ses',
      headers: { 'content-type': 'text/plain; charset=UTF-8' },
      payload: JSON.stringify(signedNotification()),
    });
    const body = reply.json();
    assertProblem({ status: reply.statusCode, headers: reply.headers, body }, 503, 'webhook_not_configured');
    assert.match(body.detail, /SES_TOPIC_ARNS/);
    assert.deepEqual(fetched, [], 'no certificate is even fetched');
  });

  test('SES_TOPIC_ARNS must list topic ARNs', () => {
    const dir = '/nonexistent-hopper-test';
    assert.throws(
      () => loadConfig(testConfigEnv(dir, { SES_TOPIC_ARNS: 'hopper-ses, arn:aws:sns:us-east-1:123456789012:hopper' })),
      (error: Error) => error instanceof ConfigError && /SES_TOPIC_ARNS must list SNS topic ARNs.*"hopper-ses"/.test(error.message),
    );
    const config = loadConfig(
      testConfigEnv(dir, {
        SES_TOPIC_ARNS: 'arn:aws:sns:us-east-1:123456789012:hopper, arn:aws-us-gov:sns:us-gov-west-1:123456789012:b.fifo',
      }),
    );
    assert.equal(config.sesTopicArns.length, 2);
  });
});
