import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { simpleParser } from 'mailparser';
import { classify } from '../../src/inbound/classify.ts';
import { tools } from '../support/tools.ts';

/**
 * Sisimai (Debian's libsisimai-perl, installed by .ci/run) as the judge of bounces outside
 * ../shared/bounces: messages written here in the forms of Postfix, Exim, qmail and sendmail, with
 * the failures the issue names (an unknown user, a full mailbox, a Gmail DMARC refusal, a
 * Microsoft block, a policy refusal, an expiry). Hopper must agree with Sisimai on each: a bounce,
 * and hard exactly when Sisimai flags it hard. The service itself never needs Perl.
 */

const postfix = (recipient: string, status: string, said: string) =>
  [
    'Return-Path: <>',
    'From: MAILER-DAEMON@mx.example.net (Mail Delivery System)',
    'To: b-token@in.example',
    'Subject: Undelivered Mail Returned to Sender',
    'Date: Fri, 27 Nov 2026 10:00:00 +0000',
    'Message-ID: <20261127100000.1@mx.example.net>',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="B1"',
    '',
    '--B1',
    'Content-Description: Notification',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'This is the mail system at host mx.example.net.',
    '',
    "I'm sorry to have to inform you that your message could not",
    "be delivered to one or more recipients. It's attached below.",
    '',
    `<${recipient}>: host mx.example.org[192.0.2.9] said: ${said} (in reply to RCPT TO command)`,
    '',
    '--B1',
    'Content-Description: Delivery report',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.example.net',
    'Arrival-Date: Fri, 27 Nov 2026 09:59:58 +0000',
    '',
    `Final-Recipient: rfc822; ${recipient}`,
    `Original-Recipient: rfc822;${recipient}`,
    'Action: failed',
    `Status: ${status}`,
    'Remote-MTA: dns; mx.example.org',
    `Diagnostic-Code: smtp; ${said}`,
    '',
    '--B1',
    'Content-Description: Undelivered Message Headers',
    'Content-Type: text/rfc822-headers',
    '',
    'From: Jane Agent <jane@agents.example>',
    `To: ${recipient}`,
    'Subject: A question for you',
    '',
    '--B1--',
    '',
  ].join('\n');

const exim = (recipient: string, said: string) =>
  [
    'Return-Path: <>',
    'From: Mail Delivery System <Mailer-Daemon@mx.example.net>',
    'To: b-token@in.example',
    'Subject: Mail delivery failed: returning message to sender',
    'Date: Fri, 27 Nov 2026 10:00:00 +0000',
    'Message-Id: <E1abc-0001@mx.example.net>',
    'Auto-Submitted: auto-replied',
    `X-Failed-Recipients: ${recipient}`,
    '',
    'This message was created automatically by mail delivery software.',
    '',
    'A message that you sent could not be delivered to one or more of its',
    'recipients. This is a permanent error. The following address(es) failed:',
    '',
    `  ${recipient}`,
    `    ${said}`,
    '',
    '------ This is a copy of the message, including all the headers. ------',
    '',
    'From: Jane Agent <jane@agents.example>',
    `To: ${recipient}`,
    'Subject: A question for you',
    '',
    'Hello',
    '',
  ].join('\n');

const qmail = (recipient: string, said: string) =>
  [
    'Return-Path: <>',
    'From: MAILER-DAEMON@mx.example.net',
    'To: b-token@in.example',
    'Subject: failure notice',
    'Date: Fri, 27 Nov 2026 10:00:00 +0000',
    'Message-ID: <q1@mx.example.net>',
    '',
    'Hi. This is the qmail-send program at mx.example.net.',
    "I'm afraid I wasn't able to deliver your message to the following addresses.",
    "This is a permanent error; I've given up. Sorry it didn't work out.",
    '',
    `<${recipient}>:`,
    said,
    '',
    '--- Below this line is a copy of the message.',
    '',
    'From: Jane Agent <jane@agents.example>',
    `To: ${recipient}`,
    'Subject: A question for you',
    '',
  ].join('\n');

const CASES: [string, string][] = [
  [
    'Postfix: user unknown',
    postfix('pat@example.org', '5.1.1', '550 5.1.1 <pat@example.org>: Recipient address rejected: User unknown in local recipient table'),
  ],
  ['Postfix: mailbox full', postfix('pat@example.org', '5.2.2', '552 5.2.2 <pat@example.org>: Mailbox full')],
  [
    'Postfix: Gmail DMARC refusal',
    postfix(
      'pat@example.org',
      '5.7.26',
      "550-5.7.26 Unauthenticated email from agents.example is not accepted due to domain's DMARC policy",
    ),
  ],
  ['Postfix: Microsoft block', postfix('pat@example.org', '5.7.606', '550 5.7.606 Access denied, banned sending IP [192.0.2.1]')],
  ['Postfix: host not found', postfix('pat@nowhere.example', '5.1.2', '550 5.1.2 Host or domain name not found. Name service error')],
  [
    'Exim: no such user',
    exim(
      'pat@example.org',
      'SMTP error from remote mail server after RCPT TO:<pat@example.org>:\n    host mx.example.org [192.0.2.9]: 550 5.1.1 No such user here',
    ),
  ],
  [
    'Exim: blocked',
    exim(
      'pat@example.org',
      'SMTP error from remote mail server after RCPT TO:<pat@example.org>:\n    host mx.example.org [192.0.2.9]: 554 5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org',
    ),
  ],
  ['qmail: user unknown', qmail('pat@example.org', 'Remote host said: 550 5.1.1 <pat@example.org>... User unknown')],
  ['qmail: over quota', qmail('pat@example.org', 'Remote host said: 552 5.2.2 Mailbox quota exceeded')],
];

describe('Sisimai as the judge of other bounces', { skip: tools.sisimai.skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'sisimai-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const [name, message] of CASES) {
    test(name, async () => {
      const file = join(dir, `${name.replace(/\W+/g, '-')}.eml`);
      writeFileSync(file, message);
      const verdict = execFileSync(
        'perl',
        ['-MSisimai', '-e', 'printf "%s %d\\n", $_->reason, $_->softbounce == 0 ? 1 : 0 for @{ Sisimai->make(shift) || [] }', file],
        { encoding: 'utf8' },
      ).trim();
      assert.match(verdict, /^\w+ [01]$/, `Sisimai reads it as one bounce: "${verdict}"`);
      const sisimaiHard = verdict.endsWith(' 1');
      const raw = Buffer.from(message);
      const what = classify(await simpleParser(raw), { raw, nullSender: true });
      assert.equal(what.kind, 'bounce', name);
      assert.ok(what.kind === 'bounce');
      assert.equal(what.report.hard, sisimaiHard, `Sisimai: ${verdict}; Hopper: ${what.report.reason}`);
    });
  }
});
