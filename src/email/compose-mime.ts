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
interface ComposedEmail {
  envelope: { from: string; to: string[] };
  raw: string;
}

const KNOWN_FIELDS = new Set(['messageId', 'from', 'replyTo', 'envelope', 'to', 'subject', 'html', 'text', 'headers']);
const OWN_HEADERS = new Set([
  'from',
  'reply-to',
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
  const { from, to, subject, html, text, messageId, replyTo, envelope } = email;
  if (typeof to !== 'string' || !SIMPLE_ADDRESS.test(to)) return undefined;
  if (typeof subject !== 'string' || typeof html !== 'string' || typeof text !== 'string') return undefined;
  const sender = addressLine('From', from);
  if (!sender) return undefined;
  const answerTo = replyTo === undefined ? undefined : addressLine('Reply-To', replyTo);
  if (answerTo === null) return undefined;
  // An envelope of our own may only name the sender (VERP): the recipient is the one in To.
  let envelopeFrom = sender.address;
  if (envelope !== undefined) {
    const keys = Object.keys(envelope);
    const bounceTo = (envelope as { from?: unknown }).from;
    if (keys.some((k) => k !== 'from') || typeof bounceTo !== 'string' || !SIMPLE_ADDRESS.test(bounceTo)) return undefined;
    envelopeFrom = bounceTo;
  }
  const extra = extraHeaders(email.headers);
  if (extra === undefined) return undefined;

  const boundary = `${boundaryBase}${(boundaryCount++).toString(36)}`;
  const lines = [
    sender.header,
    ...(answerTo ? [answerTo.header] : []),
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
  return { envelope: { from: envelopeFrom, to: [to] }, raw: lines.join('\r\n') };
}

type AddressValue = OutgoingEmail['from'];

/**
 * The header line and bare address of a single-address header (From, Reply-To), given as text or
 * as `{ name, address }`; null when it is not one simple address. A sender's From is the same for
 * all its emails: worked out once.
 */
function addressLine(key: 'From' | 'Reply-To', value: AddressValue): { header: string; address: string } | null {
  let text: string;
  if (typeof value === 'string') text = value;
  else if (value && typeof value === 'object' && !Array.isArray(value) && typeof value.address === 'string') {
    if (typeof value.name !== 'string' && value.name !== undefined) return null;
    text = `${value.name ?? ''}\u0000${value.address}`;
  } else return null;
  const cacheKey = `${key}\u0001${text}`;
  let line = senders.get(cacheKey);
  if (line === undefined) {
    const parsed = typeof value === 'string' ? addressparser(value, { flatten: true }) : [value as { name?: string; address: string }];
    const [first, ...rest] = parsed;
    const address = first?.address ?? '';
    line =
      rest.length === 0 && SIMPLE_ADDRESS.test(address)
        ? { header: foldLines(`${key}: ${encoder.encodeHeaderValue(key, value as never)}`, 76), address }
        : null;
    // Reply-To carries a per-delivery token: only From repeats.
    if (key === 'From' && senders.size < 1000) senders.set(cacheKey, line);
  }
  return line;
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
