import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { retryHintMs, slowDownAnswer } from '../../src/email/relay-backoff.ts';
import { scheduleNow, seedBulkSend } from '../sending/support/bulk-send.ts';
import { deliveriesOf, readEmail, type SendingApp, startSendingApp, waitForStatus } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';

/**
 * A relay that says "later" is left alone (src/email/relay-backoff.ts): one answer slows the whole
 * pool, not one recipient; the pool tries one again after a back-off that grows, and opens once
 * that one goes through. Against a real SMTP server on loopback answering every RCPT with 421.
 */
describe('when the relay says later', () => {
  test('slow-down answers of real relays are told from the refusals of one mailbox, and their hints are read', () => {
    const slowDowns = [
      // Gmail, SES, Microsoft, SendGrid, and the plain form the issue met.
      '421-4.7.28 Our system has detected an unusual rate of unsolicited mail originating from your IP address. To protect our users from spam, mail sent from your IP address has been temporarily rate limited.',
      '454 Throttling failure: Maximum sending rate exceeded.',
      '451 4.7.650 The mail server [192.0.2.1] has been temporarily rate limited due to IP reputation.',
      '421 Too many concurrent SMTP connections; please try again later.',
      '421 4.7.0 Try again later',
    ];
    for (const reply of slowDowns) {
      const code = Number(reply.slice(0, 3));
      assert.ok(slowDownAnswer({ responseCode: code, response: reply, message: reply }), reply);
    }
    const oneMailbox = [
      '452 4.2.2 The email account that you tried to reach is over quota.',
      '450 4.2.1 Mailbox busy',
      '451 4.3.0 Temporary local problem',
    ];
    for (const reply of oneMailbox) {
      const code = Number(reply.slice(0, 3));
      assert.equal(slowDownAnswer({ responseCode: code, response: reply, message: reply }), null, reply);
    }
    assert.equal(
      slowDownAnswer({ responseCode: 550, response: '550 5.7.1 Rate limited forever', message: '' }),
      null,
      'a 5xx is a refusal',
    );
    assert.equal(slowDownAnswer({ message: 'connect ECONNREFUSED' }), null, 'no answer at all is no slow-down');

    assert.equal(retryHintMs('421 4.7.0 Too many messages, try again in 5 minutes'), 300_000);
    assert.equal(retryHintMs('451 4.7.1 Rate limited; retry after 30 seconds'), 30_000);
    assert.equal(retryHintMs('421 Throttled. Retry-After: 120'), 120_000);
    assert.equal(retryHintMs('421 please wait 2 min before sending more'), 120_000);
    assert.equal(retryHintMs('421 4.7.0 Try again later'), null);
  });

  // The default back-off (from 1 s) over 20 s, scaled down by 4: from 250 ms over 5 s, the same
  // back-offs in a row (about five tries of one message), a quarter of the wait.
  describe('a relay answering 421 to every RCPT for 5 s while 100 recipients wait (back-off from 250 ms)', () => {
    let s: SendingApp;
    before(async () => {
      s = await startSendingApp({ SMTP_MAX_CONNECTIONS: '5', SMTP_BACKOFF_BASE: '250ms' });
    });
    after(() => s.close());

    test('at most 25 RCPTs in those 5 s, then all 100 delivered exactly once within 30 s, no attempt used up', async (t) => {
      const rcpts: number[] = [];
      let refusingUntil: number | undefined;
      s.sink.behave({
        recipient: () => {
          const now = Date.now();
          rcpts.push(now);
          refusingUntil ??= now + 5_000;
          return now < refusingUntil ? { code: 421, message: '4.7.0 Try again later' } : undefined;
        },
      });
      const { messageId } = await seedBulkSend(s.t.database.db, s.owner, 100);
      await scheduleNow(s.t.database.db, s.t.queue, messageId);

      const sent = await waitForStatus(s, messageId, ['Sent', 'Failed', 'Cancelled'], 60_000);
      const recovered = refusingUntil as number;
      const tried = rcpts.filter((at) => at < recovered).length;
      t.diagnostic(
        `${tried} RCPTs while the relay said later; all delivered ${Math.round((Math.max(...s.sink.messages.map((m) => m.at)) - recovered) / 1000)} s after it recovered`,
      );
      assert.ok(tried >= 1, 'the relay was asked');
      assert.ok(tried <= 25, `${tried} RCPTs while the relay said later (at most 25)`);

      assert.equal(sent.status, 'Sent');
      const counts = s.sink.countsByMessageId();
      assert.equal(counts.size, 100, 'every recipient received it');
      assert.ok(
        [...counts.values()].every((n) => n === 1),
        'exactly once each',
      );
      const last = Math.max(...s.sink.messages.map((m) => m.at));
      assert.ok(last - recovered <= 30_000, `all delivered ${Math.round((last - recovered) / 1000)} s after the relay recovered`);

      const deliveries = await deliveriesOf(s, messageId);
      assert.ok(
        deliveries.every((d) => d.state === 'sent' && d.attempts === 1),
        `no delivery used up an attempt waiting: ${JSON.stringify(deliveries.filter((d) => d.attempts !== 1).map((d) => [d.id, d.attempts]))}`,
      );
      const reporting = (await readEmail(s, messageId)).reporting;
      assert.equal(reporting.sent, 100);
      assert.equal(reporting.deferred, tried, 'each refused RCPT counted once as deferred; those held back unsent not at all');
    });
  });

  test('while the relay is left alone, new sends wait without reaching it', async () => {
    const s = await startSendingApp({ SMTP_MAX_CONNECTIONS: '2' });
    try {
      let refusing = true;
      let asked = 0;
      s.sink.behave({
        recipient: () => {
          asked++;
          return refusing ? { code: 421, message: '4.7.0 Try again in 30 seconds' } : undefined;
        },
      });
      const first = await seedBulkSend(s.t.database.db, s.owner, 3);
      await scheduleNow(s.t.database.db, s.t.queue, first.messageId);
      await waitFor('the first slow-down', () => asked > 0);
      const askedBefore = asked;
      const second = await seedBulkSend(s.t.database.db, s.owner, 3);
      await scheduleNow(s.t.database.db, s.t.queue, second.messageId);
      await waitFor('the second email to be deferred unsent', async () => {
        const deliveries = await deliveriesOf(s, second.messageId);
        return deliveries.length === 3 && deliveries.every((d) => d.state === 'deferred');
      });
      assert.ok(asked <= askedBefore + 1, `the second email did not reach the relay (${asked - askedBefore} more RCPTs)`);
      const waiting = await deliveriesOf(s, second.messageId);
      const wait = Math.min(...waiting.map((d) => d.next_attempt_at.getTime())) - Date.now();
      assert.ok(wait > 20_000, `the reply's "try again in 30 seconds" is honoured (next try in ${Math.round(wait / 1000)} s)`);
      assert.ok(
        waiting.every((d) => d.attempts === 0),
        'held back unsent: no attempt counted',
      );
      refusing = false;
    } finally {
      await s.close();
    }
  });
});
