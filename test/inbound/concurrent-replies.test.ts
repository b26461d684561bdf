import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { SendingApp } from '../sending/support/sending-app.ts';
import { readEmail } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { AGENT, client, type Sent, sendTo, startInboundApp } from './support.ts';

/** 200 replies arriving at once over real SMTP (20 connections, ten times as many messages), each twice: the counters are exact. */
describe('inbound mail under concurrency', () => {
  const N = 200;
  let s: SendingApp & { port: number };
  let sent: Sent;
  before(async () => {
    s = await startInboundApp({ SMTP_MAX_CONNECTIONS: '10' });
    sent = await sendTo(s, N);
  });
  after(() => s.close());

  test(`${N} concurrent replies (and a retried copy of each): reply = ${N}, every one stored once and forwarded once`, async () => {
    const mta = client(s.port, true);
    try {
      const send = (to: Sent['to'][number], i: number) =>
        mta.sendMail({
          from: to.email,
          to: to.replyTo,
          subject: `Re: hello ${i}`,
          text: `Reply number ${i}`,
          messageId: `<c-${i}@mail.example>`,
        });
      const results = await Promise.all(sent.to.map(send));
      assert.ok(results.every((r) => /^250/.test(r.response)));
      await Promise.all(sent.to.map(send));
    } finally {
      mta.close();
    }
    const email = await readEmail(s, sent.emailId);
    assert.equal(email.reporting.reply, N);
    const stored = await s.t.database.db
      .selectFrom('replies')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(stored.n), N);
    await waitFor('every forward', () => s.sink.to(AGENT).length >= N);
    assert.equal(s.sink.to(AGENT).length, N);
  });
});
