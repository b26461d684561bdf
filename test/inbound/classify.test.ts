import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { simpleParser } from 'mailparser';
import { classify } from '../../src/inbound/classify.ts';

/**
 * The classifier on messages written for the cases the corpus (bounce-corpus.test.ts) does not
 * isolate: what makes a bounce a bounce and a reply a reply, and a message crafted to make the
 * patterns backtrack.
 */
const read = async (lines: string[]) => {
  const raw = Buffer.from(lines.join('\r\n'));
  return classify(await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true }), { raw });
};

describe('inbound classifier', () => {
  test('an Exim bounce carries Auto-Submitted and is still a bounce, hard for an unknown user', async () => {
    const what = await read([
      'From: Mail Delivery System <Mailer-Daemon@mx.example.net>',
      'To: b-token@in.example',
      'Subject: Mail delivery failed: returning message to sender',
      'Auto-Submitted: auto-replied',
      '',
      'This message was created automatically by mail delivery software.',
      '',
      'A message that you sent could not be delivered to one or more of its',
      'recipients. This is a permanent error. The following address(es) failed:',
      '',
      '  pat@example.org',
      '    SMTP error from remote mail server after RCPT TO:<pat@example.org>:',
      '    host mx.example.org [192.0.2.9]: 550 5.1.1 <pat@example.org>: Recipient address rejected: User unknown',
      '',
      '------ This is a copy of the message, including all the headers. ------',
      'Subject: A question for you',
      '',
    ]);
    assert.equal(what.kind, 'bounce');
    assert.ok(what.kind === 'bounce');
    assert.deepEqual([what.report.hard, what.report.status, what.report.classification], [true, '5.1.1', 'user_unknown']);
    assert.match(what.report.diagnostic, /^SMTP error from remote mail server after RCPT TO:<pat@example\.org>: host mx\.example\.org/);
  });

  test('an out-of-office reply is an automatic reply even from the null sender; a person writing "undeliverable" is a reply', async () => {
    const vacation = await read([
      'From: Pat <pat@example.org>',
      'To: r-token@in.example',
      'Subject: Out of Office: back on Monday',
      'Auto-Submitted: auto-replied',
      'Return-Path: <>',
      '',
      'I am away until Monday with limited access to email.',
      '',
    ]);
    assert.deepEqual(vacation, { kind: 'reply', autoReply: true });
    const person = await read([
      'From: Pat <pat@example.org>',
      'To: r-token@in.example',
      'Subject: Re: A question for you',
      '',
      'Your last email was undeliverable to my old work address, use this one. Yes, call me Friday!',
      '',
    ]);
    assert.deepEqual(person, { kind: 'reply', autoReply: false });
  });

  test('a delay notice is a delayed soft bounce; a success notice is neither', async () => {
    const report = (action: string, status: string) => [
      'From: MAILER-DAEMON@mx.example.net',
      'Subject: Delivery Status Notification',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="x"',
      '',
      '--x',
      'Content-Type: text/plain',
      '',
      'Report.',
      '--x',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.example.net',
      '',
      'Final-Recipient: rfc822; pat@example.org',
      `Action: ${action}`,
      `Status: ${status}`,
      '--x--',
      '',
    ];
    const delayed = await read(report('delayed', '4.4.7'));
    assert.ok(delayed.kind === 'bounce');
    assert.deepEqual([delayed.report.delayed, delayed.report.hard, delayed.report.classification], [true, false, 'delayed']);
    assert.deepEqual(await read(report('delivered', '2.0.0')), { kind: 'delivered' });
  });

  test('a message crafted to make the patterns backtrack (200 kB without a space) is read, and quickly enough to finish', {
    timeout: 20_000,
  }, async () => {
    const what = await read([
      'From: MAILER-DAEMON@mx.example.net',
      'Subject: Undelivered Mail Returned to Sender',
      '',
      '<a@b'.repeat(50_000),
      '',
    ]);
    assert.equal(what.kind, 'bounce');
  });
});
