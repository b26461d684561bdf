import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { audience, createEmail, readEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from './support/sending-app.ts';

/**
 * A relay that refuses some recipients at RCPT among many it accepts, with few connections and
 * batches smaller than the send. Reported as a stall (the email stuck in Sending with a batch
 * queued, 3 of 4 runs on PostgreSQL): it was the hard-bounce brake of issue 40 doing its work —
 * 20 refusals in 200 are 10 %, over BRAKE_HARD_BOUNCE_RATE's 5 %, so the user is paused between
 * batches (test/sending/brakes.test.ts). With the brake lifted, every accepted recipient gets one
 * message and every refused one is a hard bounce.
 */
describe('recipients refused at RCPT among many accepted', () => {
  let s: SendingApp;
  before(async () => {
    s = await startSendingApp({ SEND_BATCH_SIZE: '40', SMTP_MAX_CONNECTIONS: '2', BRAKE_HARD_BOUNCE_RATE: '100' });
  });
  after(() => s.close());

  test('200 recipients, every tenth refused with 550 5.1.1: Sent, 180 delivered once and 20 hard bounces, nothing left queued', async () => {
    const people = await audience(s, 200);
    const refused = new Set(people.contacts.filter((_, i) => i % 10 === 0).map((c) => c.email.toLowerCase()));
    s.sink.behave({
      recipient: (address) => (refused.has(address.toLowerCase()) ? { code: 550, message: '5.1.1 no such user here' } : undefined),
    });
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    await waitForStatus(s, email.id, ['Sent'], 120_000);
    const { reporting } = await readEmail(s, email.id);
    assert.equal(reporting.sent, 180);
    assert.equal(reporting.hard_bounce, 20);
    assert.equal(s.sink.messages.length, 180, 'each accepted recipient got one message');
    assert.equal(new Set(s.sink.messages.flatMap((m) => m.to)).size, 180);
  });
});
