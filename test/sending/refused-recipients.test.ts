import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { audience, createEmail, readEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from './support/sending-app.ts';
import { waitFor } from './support/wait.ts';

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

/**
 * A refusal while the delivery waits for its hand-over slot. The SMTP channel stages the message
 * and asks for a slot at the final dot without waiting for it; when every slot of the process is
 * held (by other deliveries' records, here by the test) and the server refuses the recipient
 * meanwhile, the send ends before the slot comes. That slot, when it comes, must go back: once it
 * was kept by nobody, and once every slot was lost that way the process never handed anything over again.
 */
describe('a recipient refused while its delivery waits for a hand-over slot', () => {
  let s: SendingApp;
  before(async () => {
    s = await startSendingApp({ SMTP_MAX_CONNECTIONS: '1', BRAKE_HARD_BOUNCE_RATE: '100' });
  });
  after(() => s.close());

  test('the slot it waited for is given back, and the next email goes out', async () => {
    const slots = s.t.workers!.engine.handOvers;
    assert.equal(slots.free, 2, 'SMTP_MAX_CONNECTIONS=1: two hand-over slots');
    const refused = await audience(s, 1);
    const accepted = await audience(s, 1);
    const address = refused.contacts[0]!.email.toLowerCase();
    s.sink.behave({ recipient: (a) => (a.toLowerCase() === address ? { code: 550, message: '5.1.1 no such user here' } : undefined) });

    // Other deliveries' records hold every slot while the refused one is handed over.
    const releases = [await slots.acquire(), await slots.acquire()];
    const first = await createEmail(s, { status: 'Scheduled', recipients: toTag(refused) });
    await waitForStatus(s, first.id, ['Sent', 'Failed'], 20_000);
    assert.equal((await readEmail(s, first.id)).reporting.hard_bounce, 1);
    assert.equal(slots.free, 0, 'the held slots are still taken');
    for (const release of releases) release();
    await waitFor('the hand-over slots to be free again', () => slots.free === 2, { timeoutMs: 2_000 });

    const second = await createEmail(s, { status: 'Scheduled', recipients: toTag(accepted) });
    await waitForStatus(s, second.id, ['Sent'], 20_000);
    assert.equal(s.sink.to(accepted.contacts[0]!.email.toLowerCase()).length, 1);
    assert.equal(slots.free, 2);
  });
});
