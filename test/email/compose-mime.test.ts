import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import MailComposer from 'nodemailer/lib/mail-composer';
import { composeMime } from '../../src/email/compose-mime.ts';
import type { OutgoingEmail } from '../../src/email/render.ts';
import { parseEmail } from '../sending/support/mime.ts';

/**
 * compose-mime.ts writes the SMTP path's messages itself (nodemailer only carries them). Whatever
 * it writes must read exactly as nodemailer's own composition of the same email: same headers,
 * same text and HTML once decoded.
 */
const tricky: OutgoingEmail = {
  messageId: '<templated_email-7.42@hopper.test>',
  from: 'Hopper Öffice <no-reply@hopper.test>',
  to: 'pat@example.com',
  subject: `Über-long subject for José with "quotes", =signs= and more words ${'to fold '.repeat(8)}`,
  text: `Hi José,\n\n.a line that starts with a dot\nA = sign, a tab\there, trailing space \n${'long '.repeat(40)}\r\nCRLF line\n\nUnsubscribe: https://hopper.test/unsubscribe/AQMAAAAAAAAAAZKT`,
  html: `<!doctype html><html><body><p>Hi Jos&eacute; — ünïcödé,</p>\n.<p>${'<b>long</b> '.repeat(30)}</p><a href="https://hopper.test/t/c/x?a=1&amp;b=2">x</a></body></html>`,
  headers: {
    'List-Unsubscribe': {
      prepared: true,
      foldLines: true,
      value:
        '<https://hopper.test/unsubscribe/AQMAAAAAAAAAAZKTECDCmSFSzMFDkAtCTbE>, <mailto:unsubscribe@hopper.test?subject=unsubscribe-AQMAAAAAAAAAAZKTECDCmSFSzMFDkAtCTbE>',
    } as never,
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    'X-SMTPAPI': { prepared: true, foldLines: false, value: '{"unique_args":{"hopper_delivery_id":"42"}}' } as never,
    'X-Campaign': 'Spring — 2026',
  },
};

describe('composeMime', () => {
  test('reads exactly as nodemailer composes the same email', async () => {
    const date = new Date('2026-07-12T12:56:00Z');
    const ours = composeMime(tricky, date);
    assert.ok(ours, 'the email is one composeMime covers');
    assert.deepEqual(ours.envelope, { from: 'no-reply@hopper.test', to: ['pat@example.com'] });
    const theirs = (await new MailComposer({ ...tricky, date } as never).compile().build()).toString('utf8');

    const a = parseEmail(ours.raw);
    const b = parseEmail(theirs);
    for (const header of [
      'from',
      'to',
      'subject',
      'message-id',
      'date',
      'mime-version',
      'list-unsubscribe',
      'list-unsubscribe-post',
      'x-smtpapi',
      'x-campaign',
    ]) {
      assert.equal(a.headers.get(header), b.headers.get(header), header);
    }
    assert.equal(a.headers.get('subject'), tricky.subject);
    assert.equal(a.contentType, 'multipart/alternative');
    assert.equal(a.text, b.text);
    assert.equal(a.html, b.html);
    assert.equal(a.text, tricky.text!.toString().replace(/\r\n/g, '\n'));
    assert.equal(a.html, tricky.html!.toString());
  });

  test('stays within SMTP line limits and uses CRLF only', () => {
    const { raw } = composeMime(tricky, new Date())!;
    const [head, body] = [raw.slice(0, raw.indexOf('\r\n\r\n')), raw.slice(raw.indexOf('\r\n\r\n'))];
    // Headers fold at spaces (a URL longer than a line stays whole); bodies are quoted-printable.
    for (const line of head.split('\r\n')) assert.ok(line.length <= 998, `header line of ${line.length}`);
    for (const line of body.split('\r\n')) assert.ok(line.length <= 76, `body line of ${line.length}: ${line.slice(0, 40)}…`);
    assert.doesNotMatch(raw.replace(/\r\n/g, ''), /[\r\n]/);
    assert.ok(
      [...Buffer.from(raw)].every((byte) => byte < 0x80),
      '7-bit clean',
    );
  });

  test('leaves to nodemailer what it does not cover', () => {
    assert.equal(composeMime({ ...tricky, attachments: [{ content: 'x' }] }, new Date()), undefined);
    assert.equal(composeMime({ ...tricky, to: 'a@example.com, b@example.com' }, new Date()), undefined);
    assert.equal(composeMime({ ...tricky, to: 'pat@exämple.com' }, new Date()), undefined);
    assert.equal(composeMime({ ...tricky, headers: { 'Content-Type': 'text/plain' } }, new Date()), undefined);
    assert.equal(composeMime({ ...tricky, from: 'a@example.com, b@example.com' }, new Date()), undefined);
  });
});
