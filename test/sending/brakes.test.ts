import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { assertProblem, createUser, TIMESTAMP } from '../support/factories.ts';
import {
  audience,
  createEmail,
  deliveriesOf,
  type SendingApp,
  startSendingApp,
  toTag,
  waitForDueJobs,
  waitForStatus,
} from './support/sending-app.ts';
import { waitFor } from './support/wait.ts';

// The two brakes run side by side, each on an app and a database of its own: neither waits for the other's sends.
describe('brakes', { concurrency: true }, () => {
  /**
   * The complaint and bounce brakes (docs/sending.md, "Brakes"), as the "done when" puts
   * it: a user's email reaches 300 contacts over a real SMTP server; 2 spam reports come back
   * through Postmark's webhook (0.67 %, over the 0.3 % limit); the same user's next email reaches
   * no one and stays Scheduled, the user shows `sending_paused` with the complaint rate, a
   * `user.sending_paused` event is written, the user and the Administrator are mailed; an
   * Administrator's resume sends the held email, and the pause comes back at the next one.
   */
  describe('complaint brake', () => {
    let s: SendingApp;
    let sender: SendingApp;
    let userId: number;
    let userEmail: string;
    const postmark = `Basic ${Buffer.from('pm:secret-pw').toString('base64')}`;

    before(async () => {
      s = await startSendingApp({
        POSTMARK_WEBHOOK_USER: 'pm',
        POSTMARK_WEBHOOK_PASSWORD: 'secret-pw',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE: 'true',
      });
      const user = await createUser(s.t, 'User');
      userId = user.id;
      userEmail = user.email;
      sender = { ...s, api: asKey(s.t.app, user.key), owner: user.id };
    });
    after(() => s.close());

    const complain = async (deliveryId: number, address: string, id: number) => {
      const reply = await s.t.app.inject({
        method: 'POST',
        url: '/v3/callbacks/postmark',
        headers: { 'content-type': 'application/json', authorization: postmark },
        payload: JSON.stringify({
          RecordType: 'SpamComplaint',
          ID: id,
          Email: address,
          Metadata: { hopper_delivery_id: String(deliveryId) },
        }),
      });
      assert.equal(reply.statusCode, 200, reply.body);
    };
    const received = (subject: string) => s.sink.messages.filter((m) => m.raw.includes(subject)).length;

    test('2 spam reports on an email to 300 hold the next email; the user says why; resuming sends it', { timeout: 180_000 }, async () => {
      const endpoint = await sender.api.post(`/v3/users/${userId}/webhooks`, {
        url: 'http://127.0.0.1:9/hook',
        events: ['user.sending_paused'],
      });
      assert.equal(endpoint.status, 201, endpoint.raw);
      const many = await audience(sender, 300);
      const first = await createEmail(sender, { subject: 'Spring listings', recipients: toTag(many), status: 'Scheduled' });
      await waitForStatus(sender, first.id, ['Sent'], 120_000);
      assert.equal(received('Spring listings'), 300);
      const delivered = await deliveriesOf(sender, first.id);
      await complain(delivered[0]!.id, delivered[0]!.address, 1);
      await complain(delivered[1]!.id, delivered[1]!.address, 2);

      const few = await audience(sender, 5);
      const before = s.sink.messages.length;
      const next = await createEmail(sender, { subject: 'Open house', recipients: toTag(few), status: 'Scheduled' });
      const paused = await waitFor(
        'the user to be paused',
        async () => {
          const user = await s.api.get(`/v3/users/${userId}`);
          return user.body.sending_paused ?? false;
        },
        { timeoutMs: 30_000 },
      );
      assert.equal(paused.reason, 'complaint_rate');
      assert.match(paused.since, TIMESTAMP);
      assert.equal(paused.complaint_rate, 0.006667, '2 of 300 accepted');
      assert.equal(paused.hard_bounce_rate, 0);
      // The engine has run the due job and held the email: nothing goes out.
      await waitForDueJobs(s, next.id);
      assert.equal((await sender.api.get(`/v3/templated_emails/${next.id}`)).body.status, 'Scheduled');
      assert.equal(received('Open house'), 0, 'nothing reached the relay');

      const event = await s.t.database.db
        .selectFrom('webhook_events')
        .select(['type', 'snapshot'])
        .where('user_id', '=', userId)
        .where('type', '=', 'user.sending_paused')
        .execute();
      assert.equal(event.length, 1);
      assert.deepEqual((event[0]!.snapshot as { sending_paused: unknown }).sending_paused, paused);

      const notices = await waitFor('the notices', () => {
        const found = s.sink.messages.slice(before).filter((m) => m.raw.includes('Sending paused for'));
        return found.length >= 2 && found;
      });
      assert.deepEqual(notices.flatMap((m) => m.to).sort(), [userEmail, 'admin@localhost'].sort());
      assert.match(notices[0]!.raw, /0\.67 %/);

      assertProblem(await sender.api.post(`/v3/users/${userId}/sending/resume`), 403);
      const resumed = await s.api.post(`/v3/users/${userId}/sending/resume`);
      assert.equal(resumed.status, 200, resumed.raw);
      assert.equal(resumed.body.sending_paused, null);
      await waitForStatus(sender, next.id, ['Sent'], 30_000);
      assert.equal(received('Open house'), 5);

      // Nothing new diluted the rate: the next email due pauses the user again, and waits.
      const again = await createEmail(sender, { subject: 'Price drop', recipients: toTag(few), status: 'Scheduled' });
      await waitFor('the pause to come back', async () => (await s.api.get(`/v3/users/${userId}`)).body.sending_paused ?? false);
      await waitForDueJobs(s, again.id);
      assert.equal((await sender.api.get(`/v3/templated_emails/${again.id}`)).body.status, 'Scheduled');
      assert.equal(received('Price drop'), 0);
    });

    test('below 100 sent the brake does not apply; an unknown user is a 404 to an Administrator', async () => {
      const quiet = await createUser(s.t, 'User');
      const small = await audience({ ...s, api: asKey(s.t.app, quiet.key), owner: quiet.id }, 3);
      const api = asKey(s.t.app, quiet.key);
      const email = await api.post(`/v3/users/${quiet.id}/templated_emails`, {
        subject: 'Hello there',
        body: '<p>Hi</p>',
        recipients: toTag(small),
        status: 'Scheduled',
      });
      assert.equal(email.status, 201, email.raw);
      await waitFor(
        'the small email to be sent',
        async () => (await api.get(`/v3/templated_emails/${email.body.id}`)).body.status === 'Sent',
      );
      assertProblem(await s.api.post('/v3/users/999999/sending/resume'), 404);
    });
  });

  /**
   * The hard-bounce brake: 7 hard bounces reported by Postmark on an email to 120 (5.8 %, over the
   * 5 % limit) hold the same user's next email; resuming sends it.
   */
  describe('hard-bounce brake', () => {
    let s: SendingApp;
    let sender: SendingApp;
    let userId: number;

    before(async () => {
      s = await startSendingApp({ POSTMARK_WEBHOOK_USER: 'pm', POSTMARK_WEBHOOK_PASSWORD: 'secret-pw' });
      const user = await createUser(s.t, 'User');
      userId = user.id;
      sender = { ...s, api: asKey(s.t.app, user.key), owner: user.id };
    });
    after(() => s.close());

    test('5.8 % hard bounces hold the next email; resuming sends it', { timeout: 120_000 }, async () => {
      const people = await audience(sender, 120);
      const first = await createEmail(sender, { subject: 'First listing', recipients: toTag(people), status: 'Scheduled' });
      await waitForStatus(sender, first.id, ['Sent'], 60_000);
      const delivered = await deliveriesOf(sender, first.id);
      for (const [i, d] of delivered.slice(0, 7).entries()) {
        const reply = await s.t.app.inject({
          method: 'POST',
          url: '/v3/callbacks/postmark',
          headers: { 'content-type': 'application/json', authorization: `Basic ${Buffer.from('pm:secret-pw').toString('base64')}` },
          payload: JSON.stringify({
            RecordType: 'Bounce',
            ID: 1000 + i,
            Type: 'HardBounce',
            Email: d.address,
            BouncedAt: new Date().toISOString(),
            Description: 'The server was unable to deliver your message',
            Metadata: { hopper_delivery_id: String(d.id) },
          }),
        });
        assert.equal(reply.statusCode, 200, reply.body);
      }
      const next = await createEmail(sender, { subject: 'Second listing', recipients: toTag(people), status: 'Scheduled' });
      const paused = await waitFor(
        'the user to be paused',
        async () => (await s.api.get(`/v3/users/${userId}`)).body.sending_paused ?? false,
      );
      assert.equal(paused.reason, 'hard_bounce_rate');
      assert.equal(paused.hard_bounce_rate, 0.058333, '7 of 120 sent');
      await waitForDueJobs(s, next.id);
      assert.equal((await sender.api.get(`/v3/templated_emails/${next.id}`)).body.status, 'Scheduled');
      assert.equal(s.sink.messages.filter((m) => m.raw.includes('Second listing')).length, 0);
      assert.equal((await s.api.post(`/v3/users/${userId}/sending/resume`)).status, 200);
      const sent = await waitForStatus(sender, next.id, ['Sent'], 60_000);
      assert.equal(sent.reporting.sent, 113, 'the 7 bounced addresses are retired');
    });
  });
});
