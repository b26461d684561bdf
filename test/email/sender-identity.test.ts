import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { parseEmail } from '../sending/support/mime.ts';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import { asKey } from '../support/client.ts';
import { createUser } from '../support/factories.ts';

/**
 * Sender identity over a real SMTP sink: From is the sender's own address only when its domain
 * is authenticated at the relay (SENDER_DOMAINS); otherwise MAIL_FROM's address under the
 * sender's name, with the sender's address as Reply-To. The footer shows the postal address.
 */
describe('sender identity: From, Reply-To, Return-Path and the postal address', () => {
  let s: SendingApp;
  before(async () => {
    s = await startSendingApp({ SENDER_DOMAINS: 'agents.example, Realty.example', MAIL_FROM: 'Hopper <mail@relay.example>' });
  });
  after(() => s.close());

  async function sendOne(sender: Record<string, unknown>) {
    const put = await s.api.put(`/v3/users/${s.owner}`, sender);
    assert.equal(put.status, 200, put.raw);
    const people = await audience(s, 1);
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    assert.equal((await waitForStatus(s, email.id, ['Sent', 'Failed'])).status, 'Sent');
    const [message] = s.sink.to(people.contacts[0]!.email);
    assert.ok(message);
    return { message, parsed: parseEmail(message.raw), user: put.body };
  }

  test('a sender inside SENDER_DOMAINS is From itself, with no Reply-To; Return-Path is the same address', async () => {
    const { message, parsed, user } = await sendOne({
      sender_name: 'Jane "JD" Doe',
      sender_email: 'jane@realty.example',
      postal_address: '12 Harbor Road\nSuite 4\nTampa, FL 33602',
    });
    assert.equal(user.sender_name, 'Jane "JD" Doe');
    assert.equal(user.postal_address, '12 Harbor Road\nSuite 4\nTampa, FL 33602');
    assert.equal(parsed.headers.get('from'), '"Jane \\"JD\\" Doe" <jane@realty.example>');
    assert.equal(parsed.headers.get('reply-to'), undefined);
    assert.equal(message.from, 'jane@realty.example');
    // The postal address above the unsubscribe link, in both parts.
    assert.match(parsed.html ?? '', /12 Harbor Road<br>Suite 4<br>Tampa, FL 33602<\/p>\n<p[^>]*>Don't want these emails\?/);
    assert.match(parsed.text ?? '', /12 Harbor Road\nSuite 4\nTampa, FL 33602\n\nUnsubscribe: https:\/\//);
  });

  test('a sender outside SENDER_DOMAINS: From is MAIL_FROM under their name, Reply-To their own address', async () => {
    const { message, parsed } = await sendOne({ sender_name: 'Jane Doe', sender_email: 'jane.doe@gmail.example' });
    assert.equal(parsed.headers.get('from'), 'Jane Doe <mail@relay.example>');
    assert.equal(parsed.headers.get('reply-to'), 'Jane Doe <jane.doe@gmail.example>');
    assert.equal(message.from, 'mail@relay.example');
  });

  test('defaults: the full name and account email, the operator postal address when the user has none', async () => {
    const { parsed, user } = await sendOne({ sender_name: null, sender_email: null, postal_address: null });
    assert.equal(user.sender_name, user.full_name);
    assert.equal(user.sender_email, user.email);
    assert.equal(user.postal_address, null);
    assert.equal(parsed.headers.get('reply-to'), `${user.full_name} <${user.email}>`);
    assert.match(parsed.text ?? '', /100 Main Street, Springfield, IL 62701\n\nUnsubscribe:/);
  });

  test('bad sender fields are 400s naming them; another user may not change them', async () => {
    for (const [body, field] of [
      [{ sender_email: 'not an address' }, 'sender_email'],
      [{ sender_email: 42 }, 'sender_email'],
      [{ sender_name: 'x'.repeat(256) }, 'sender_name'],
      [{ sender_name: 'Line\r\nBcc: x@y.example' }, 'sender_name'],
      [{ postal_address: 'x'.repeat(1001) }, 'postal_address'],
      [{ postal_address: ['a'] }, 'postal_address'],
    ] as const) {
      const reply = await s.api.put(`/v3/users/${s.owner}`, body);
      assert.equal(reply.status, 400, `${JSON.stringify(body)}: ${reply.raw}`);
      assert.ok(reply.body.errors[field], reply.raw);
    }
    const other = await createUser(s.t, 'User');
    const asOther = asKey(s.t.app, other.key);
    const refused = await asOther.put(`/v3/users/${s.owner}`, { sender_email: 'evil@realty.example' });
    assert.ok([403, 404].includes(refused.status), refused.raw);
  });
});

describe('postal address required for real mail', () => {
  test('with SMTP_URL and no postal address anywhere, scheduling is a 400 naming postal_address; saving is fine', async () => {
    const s = await startSendingApp({ MAIL_POSTAL_ADDRESS: '' });
    try {
      const people = await audience(s, 1);
      const refused = await s.api.post(`/v3/users/${s.owner}/templated_emails`, {
        subject: 'Hi',
        body: '<p>Hello</p>',
        status: 'Scheduled',
        recipients: toTag(people),
      });
      assert.equal(refused.status, 400, refused.raw);
      assert.ok(refused.body.errors.postal_address, refused.raw);
      const saved = await createEmail(s, { recipients: toTag(people) });
      const put = await s.api.put(`/v3/users/${s.owner}`, { postal_address: '1 Elm St, Dover, DE 19901' });
      assert.equal(put.status, 200, put.raw);
      const scheduled = await s.api.put(`/v3/templated_emails/${saved.id}`, { status: 'Scheduled' });
      assert.equal(scheduled.status, 200, scheduled.raw);
    } finally {
      await s.close();
    }
  });
});
