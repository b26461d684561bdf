import { randomBytes } from 'node:crypto';
import addressparser from 'nodemailer/lib/addressparser';
import { foldLines } from 'nodemailer/lib/mime-funcs';
import MimeNode from 'nodemailer/lib/mime-node';
import { encode as quotedPrintable, wrap } from 'nodemailer/lib/qp';
import type { OutgoingEmail } from './render.ts';

/**
 * The RFC 5322 text of a rendered email, built directly: a multipart/alternative message with a
 * quoted-printable text part and HTML part. Header values are encoded by nodemailer's own
 * `encodeHeaderValue` (addresses punycoded, non-ASCII as RFC 2047 words), so they read exactly as
 * nodemailer writes them.
 *
 * Why not let nodemailer compose: its MIME tree and stream pipeline cost about 250 µs of CPU per
 * message, more than half of what sending one costs — building the text here and handing it to the
 * SMTP pool as `raw` sends the same message for a fraction of that (bench/send.ts). Anything this
 * shape does not cover (attachments, several recipients, non-ASCII addresses, headers that clash
 * with ours) returns undefined, and the caller lets nodemailer compose it.
 */
export interface ComposedEmail {
  envelope: { from: string; to: string[] };
  raw: string;
}

const KNOWN_FIELDS = new Set(['messageId', 'from', 'to', 'subject', 'html', 'text', 'headers']);
const OWN_HEADERS = new Set([
  'from',
  'to',
  'subject',
  'message-id',
  'date',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'bcc',
  'cc',
]);
const SIMPLE_ADDRESS = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+@[A-Za-z0-9.-]+$/;
const HEADER_NAME = /^[!-9;-~]+$/;

// One node encodes every header value; it keeps no per-message state for encodeHeaderValue.
const encoder = new MimeNode();
const senders = new Map<string, { header: string; address: string } | null>();
// Boundaries contain "=_", which quoted-printable text can never contain.
const boundaryBase = `=_hopper_${randomBytes(6).toString('hex')}_`;
let boundaryCount = 0;

export function composeMime(email: OutgoingEmail, date: Date): ComposedEmail | undefined {
  for (const key of Object.keys(email))
    if (!KNOWN_FIELDS.has(key) && (email as unknown as Record<string, unknown>)[key] !== undefined) return undefined;
  const { from, to, subject, html, text, messageId } = email;
  if (typeof from !== 'string' || typeof to !== 'string' || !SIMPLE_ADDRESS.test(to)) return undefined;
  if (typeof subject !== 'string' || typeof html !== 'string' || typeof text !== 'string') return undefined;
  const sender = senderOf(from);
  if (!sender) return undefined;
  const extra = extraHeaders(email.headers);
  if (extra === undefined) return undefined;

  const boundary = `${boundaryBase}${(boundaryCount++).toString(36)}`;
  const lines = [
    sender.header,
    `To: ${to}`,
    foldLines(`Subject: ${encoder.encodeHeaderValue('Subject', subject)}`, 76),
    `Message-ID: ${messageId}`,
    `Date: ${date.toUTCString().replace(/GMT/, '+0000')}`,
    'MIME-Version: 1.0',
    ...extra,
    `Content-Type: multipart/alternative; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: quoted-printable',
    '',
    wrap(quotedPrintable(crlf(text)), 76),
    `--${boundary}`,
    'Content-Type: text/html; charset=utf-8',
    'Content-Transfer-Encoding: quoted-printable',
    '',
    wrap(quotedPrintable(crlf(html)), 76),
    `--${boundary}--`,
    '',
  ];
  return { envelope: { from: sender.address, to: [to] }, raw: lines.join('\r\n') };
}

/** The From header and envelope address of a sender (the same for every email: worked out once). */
function senderOf(from: string): { header: string; address: string } | null {
  let sender = senders.get(from);
  if (sender === undefined) {
    const [first, ...rest] = addressparser(from, { flatten: true });
    const address = first?.address ?? '';
    sender =
      rest.length === 0 && SIMPLE_ADDRESS.test(address)
        ? { header: foldLines(`From: ${encoder.encodeHeaderValue('From', from)}`, 76), address }
        : null;
    if (senders.size < 100) senders.set(from, sender);
  }
  return sender;
}

/** The caller's own headers as lines, as nodemailer writes them; undefined when one clashes with ours. */
function extraHeaders(headers: OutgoingEmail['headers']): string[] | undefined {
  if (headers === undefined) return [];
  if (typeof headers !== 'object' || Array.isArray(headers)) return undefined;
  const lines: string[] = [];
  for (const [key, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(key) || OWN_HEADERS.has(key.toLowerCase())) return undefined;
    if (typeof value === 'string') {
      if (value.trim()) lines.push(foldLines(`${key}: ${encoder.encodeHeaderValue(key, value)}`, 76));
    } else if (value && typeof value === 'object' && !Array.isArray(value) && (value as { prepared?: boolean }).prepared) {
      // A value the caller prepared itself goes out as it is, folded only if asked (nodemailer's rule).
      const prepared = value as { value: string; foldLines?: boolean };
      const line = `${key}: ${String(prepared.value ?? '').replace(/[\r\n]/g, '')}`;
      if (String(prepared.value ?? '').trim()) lines.push(prepared.foldLines ? foldLines(line) : line);
    } else {
      return undefined;
    }
  }
  return lines;
}

/** Hard line breaks as CRLF, so quoted-printable keeps them as line breaks. */
function crlf(text: string): string {
  return text.replace(/\r?\n/g, '\r\n');
}
