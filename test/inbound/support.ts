import assert from 'node:assert/strict';
import nodemailer from 'nodemailer';
import { parseEmail } from '../sending/support/mime.ts';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import type { TestAppOptions } from '../support/test-app.ts';
import { type Zone, zoneResolver } from './dns.ts';

/**
 * The engine with the inbound receiver on (a real SMTP server on loopback, STARTTLS with the
 * generated service certificate), and a nodemailer client speaking to it as a remote MTA would.
 */
export const INBOUND_DOMAIN = 'in.hopper.test';
export const AGENT = 'jane@agents.example';

export async function startInboundApp(
  env: Record<string, string> = {},
  zone: Zone = {},
  options: Pick<TestAppOptions, 'clock' | 'https'> = {},
): Promise<SendingApp & { port: number }> {
  const s = await startSendingApp(
    {
      INBOUND_DOMAIN,
      INBOUND_SMTP_PORT: '0',
      INBOUND_SMTP_HOST: '127.0.0.1',
      SENDER_DOMAINS: 'agents.example',
      ...env,
    },
    // SPF, DKIM and DMARC ask this zone, never the network: what a test does not publish does not exist.
    { dnsResolver: zoneResolver(zone), ...options },
  );
  const put = await s.api.put(`/v3/users/${s.owner}`, { sender_email: AGENT, sender_name: 'Jane Agent' });
  assert.equal(put.status, 200, put.raw);
  const port = s.t.workers?.inbound?.port;
  assert.ok(port, 'the receiver listens');
  return Object.assign(s, { port });
}

export interface Sent {
  emailId: number;
  /** The tag the contacts were put under. */
  tagId: number;
  /** Per contact: its id, address, and the addresses Hopper's email to it carried. */
  to: { contactId: number; email: string; replyTo: string; returnPath: string; unsubscribe: string }[];
}

/**
 * Sends a templated email to `n` new contacts through the engine and reads the addresses it
 * carried; `contact(i)` may give each contact's fields, `email` the email's.
 */
export async function sendTo(
  s: SendingApp,
  n: number,
  contact: (i: number) => Record<string, unknown> = () => ({}),
  fields: Record<string, unknown> = {},
): Promise<Sent> {
  const people = await audience(s, n, contact);
  const email = await createEmail(s, { ...fields, status: 'Scheduled', recipients: toTag(people) });
  assert.equal((await waitForStatus(s, email.id, ['Sent', 'Failed'], 120_000)).status, 'Sent');
  return {
    emailId: email.id,
    tagId: people.tag.id,
    to: people.contacts.map((contact) => {
      const [message] = s.sink.to(contact.email);
      assert.ok(message, `an email reached ${contact.email}`);
      const headers = parseEmail(message.raw).headers;
      const replyTo = /<([^>]+)>/.exec(headers.get('reply-to') ?? '')?.[1] ?? '';
      const unsubscribe = /<mailto:([^?>]+)/.exec(headers.get('list-unsubscribe') ?? '')?.[1] ?? '';
      return { contactId: contact.id, email: contact.email, replyTo, returnPath: message.from, unsubscribe };
    }),
  };
}

/** A nodemailer client for the receiver (STARTTLS with the self-signed service certificate). */
export function client(port: number, pool = false) {
  return nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    requireTLS: true,
    tls: { rejectUnauthorized: false },
    ...(pool ? { pool: true, maxConnections: 20, maxMessages: Number.POSITIVE_INFINITY } : {}),
  } as never);
}

/** A delivery status notification (RFC 3464) about `recipient`, as a receiving MTA writes it. */
export function dsn(to: string, recipient: string, status: string, messageId: string): string {
  return [
    'From: Mail Delivery System <MAILER-DAEMON@mx.example.net>',
    `To: ${to}`,
    'Subject: Undelivered Mail Returned to Sender',
    `Message-ID: ${messageId}`,
    'Auto-Submitted: auto-replied',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="dsn-b"',
    '',
    '--dsn-b',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    `Your message to <${recipient}> could not be delivered.`,
    '',
    '--dsn-b',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.example.net',
    '',
    `Final-Recipient: rfc822; ${recipient}`,
    `Action: ${status.startsWith('5') ? 'failed' : 'delayed'}`,
    `Status: ${status}`,
    `Diagnostic-Code: smtp; ${status.startsWith('5') ? '550' : '452'} ${status} mailbox trouble`,
    '',
    '--dsn-b',
    'Content-Type: text/rfc822-headers',
    '',
    `To: ${recipient}`,
    'Subject: A question for you',
    '',
    '--dsn-b--',
    '',
  ].join('\r\n');
}

/** An abuse report (ARF, RFC 5965) quoting the original message's headers. */
export function arf(to: string, original: { to: string; returnPath: string; replyTo: string }, messageId: string): string {
  return [
    'From: <staff@hotmail.example>',
    `To: ${to}`,
    'Subject: complaint about message from 192.0.2.1',
    `Message-ID: ${messageId}`,
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=feedback-report; boundary="arf-b"',
    '',
    '--arf-b',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'This is an email abuse report.',
    '',
    '--arf-b',
    'Content-Type: message/feedback-report',
    '',
    'Feedback-Type: abuse',
    'User-Agent: SomeGenerator/1.0',
    'Version: 1',
    '',
    '--arf-b',
    'Content-Type: message/rfc822',
    '',
    `Return-Path: <${original.returnPath}>`,
    'From: Jane Agent <jane@agents.example>',
    `Reply-To: Jane Agent <${original.replyTo}>`,
    `To: ${original.to}`,
    'Subject: A question for you',
    '',
    'Hello',
    '',
    '--arf-b--',
    '',
  ].join('\r\n');
}
