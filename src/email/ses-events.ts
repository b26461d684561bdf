import { createPublicKey, verify, X509Certificate } from 'node:crypto';
import type { DeliveryEvent } from '../sending/delivery-events.ts';

/**
 * Amazon SES bounce and complaint notifications, delivered by SNS (an HTTPS subscription):
 * checking that a post is a message SNS signed, and reading SES's notification into delivery events.
 *
 * SNS signs the message's fields (not the body's bytes) with the key of a certificate it serves
 * from `SigningCertURL`; that URL must be an https URL on an SNS host, or anyone could sign with a
 * certificate of their own. The fetcher is injectable so tests can serve a certificate of theirs.
 */
export type SnsFetch = (url: string) => Promise<string>;

interface SnsMessage {
  Type: string;
  MessageId: string;
  TopicArn: string;
  Message: string;
  Timestamp: string;
  SignatureVersion: string;
  Signature: string;
  SigningCertURL: string;
  Subject?: string;
  SubscribeURL?: string;
  Token?: string;
}

const SNS_HOST = /^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$/;

/** An https URL on an SNS host (`sns.<region>.amazonaws.com`), or undefined. */
export function snsUrl(text: unknown, path?: RegExp): URL | undefined {
  if (typeof text !== 'string' || text.length > 2048) return undefined;
  try {
    const url = new URL(text);
    if (url.protocol !== 'https:' || url.port !== '' || url.username || url.password || !SNS_HOST.test(url.hostname)) return undefined;
    if (path && !path.test(url.pathname)) return undefined;
    return url;
  } catch {
    return undefined;
  }
}

/** The fields of an SNS message in the order SNS signs them (its documented string to sign). */
function stringToSign(message: SnsMessage): string {
  const keys =
    message.Type === 'Notification'
      ? ['Message', 'MessageId', ...(message.Subject !== undefined ? ['Subject'] : []), 'Timestamp', 'TopicArn', 'Type']
      : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  return keys.map((k) => `${k}\n${(message as unknown as Record<string, string>)[k]}\n`).join('');
}

type SnsCheck = { ok: true; message: SnsMessage } | { ok: false; reason: string };

/** Reads and checks a posted SNS message: its shape, its certificate's URL and validity, its signature. */
export async function checkSnsMessage(body: unknown, fetchCert: SnsFetch, certificates: Map<string, string>, now: Date): Promise<SnsCheck> {
  const message = body as Partial<SnsMessage> | null;
  const required = ['Type', 'MessageId', 'TopicArn', 'Message', 'Timestamp', 'SignatureVersion', 'Signature', 'SigningCertURL'] as const;
  if (!message || typeof message !== 'object' || Array.isArray(message)) return { ok: false, reason: 'not an SNS message' };
  for (const key of required) if (typeof message[key] !== 'string') return { ok: false, reason: `${key} missing` };
  for (const key of ['Subject', 'SubscribeURL', 'Token'] as const) {
    if (message[key] !== undefined && typeof message[key] !== 'string') return { ok: false, reason: `${key} is not text` };
  }
  const sns = message as SnsMessage;
  if (!['Notification', 'SubscriptionConfirmation', 'UnsubscribeConfirmation'].includes(sns.Type))
    return { ok: false, reason: 'unknown Type' };
  if (sns.SignatureVersion !== '1' && sns.SignatureVersion !== '2') return { ok: false, reason: 'unknown SignatureVersion' };
  const certUrl = snsUrl(sns.SigningCertURL, /\.pem$/);
  if (!certUrl) return { ok: false, reason: 'SigningCertURL is not an https URL on an SNS host' };
  let pem = certificates.get(certUrl.href);
  if (!pem) {
    try {
      pem = await fetchCert(certUrl.href);
    } catch {
      return { ok: false, reason: 'the signing certificate could not be fetched' };
    }
    if (certificates.size < 50) certificates.set(certUrl.href, pem);
  }
  let valid = false;
  try {
    const certificate = new X509Certificate(pem);
    if (now < new Date(certificate.validFrom) || now > new Date(certificate.validTo))
      return { ok: false, reason: 'the signing certificate has expired' };
    valid = verify(
      sns.SignatureVersion === '2' ? 'sha256' : 'sha1',
      Buffer.from(stringToSign(sns), 'utf8'),
      createPublicKey(certificate.publicKey.export({ type: 'spki', format: 'pem' })),
      Buffer.from(sns.Signature, 'base64'),
    );
  } catch {
    valid = false;
  }
  return valid ? { ok: true, message: sns } : { ok: false, reason: 'signature does not match' };
}

/** Hopper's Message-ID (render.ts): `<templated_email-MESSAGE.DELIVERY@host>`. */
const HOPPER_MESSAGE_ID = /<?templated_email-\d+\.([1-9]\d{0,14})@[^>\s]+>?/;

/** SES's notification (the SNS `Message`) as delivery events: one per bounced or complaining recipient. */
export function readSesNotification(text: string, now: Date): DeliveryEvent[] {
  // biome-ignore lint/suspicious/noExplicitAny: SES's JSON, read field by field with checks below
  let note: Record<string, any>;
  try {
    note = JSON.parse(text);
  } catch {
    return [];
  }
  if (!note || typeof note !== 'object') return [];
  const type = note.notificationType ?? note.eventType;
  const mail = note.mail ?? {};
  const headers: { name?: string; value?: string }[] = Array.isArray(mail.headers) ? mail.headers : [];
  const messageId = String(mail.commonHeaders?.messageId ?? headers.find((h) => /^message-id$/i.test(String(h?.name)))?.value ?? '');
  // Hopper's Message-ID, or (SES may give the message an id of its own) the delivery header every
  // Hopper email carries, when the notifications include the original headers.
  const tagged = headers.find((h) => /^x-pm-metadata-hopper_delivery_id$/i.test(String(h?.name)))?.value;
  const deliveryId = Number(HOPPER_MESSAGE_ID.exec(messageId)?.[1] ?? (/^[1-9]\d{0,14}$/.test(String(tagged)) ? tagged : Number.NaN));
  if (!Number.isSafeInteger(deliveryId)) return [];
  const at = (value: unknown) => {
    const date = new Date(String(value ?? ''));
    return Number.isNaN(date.getTime()) ? now : date;
  };
  if (type === 'Bounce' && note.bounce) {
    const permanent = note.bounce.bounceType === 'Permanent';
    const kind = permanent ? 'hard_bounce' : 'temporary_bounce';
    return (Array.isArray(note.bounce.bouncedRecipients) ? note.bounce.bouncedRecipients : []).map((r: Record<string, unknown>) => ({
      source: 'ses',
      eventId: `${kind}:${String(note.bounce.feedbackId ?? mail.messageId ?? '')}:${String(r.emailAddress ?? '')}`.slice(0, 255),
      deliveryId,
      address: typeof r.emailAddress === 'string' ? r.emailAddress : null,
      type: kind,
      occurredAt: at(note.bounce.timestamp),
      detail: String(r.diagnosticCode ?? r.status ?? note.bounce.bounceSubType ?? '').slice(0, 2000) || null,
    }));
  }
  if (type === 'Complaint' && note.complaint) {
    return (Array.isArray(note.complaint.complainedRecipients) ? note.complaint.complainedRecipients : []).map(
      (r: Record<string, unknown>) => ({
        source: 'ses',
        eventId: `spamreport:${String(note.complaint.feedbackId ?? mail.messageId ?? '')}:${String(r.emailAddress ?? '')}`.slice(0, 255),
        deliveryId,
        address: typeof r.emailAddress === 'string' ? r.emailAddress : null,
        type: 'spamreport',
        occurredAt: at(note.complaint.timestamp),
        detail: typeof note.complaint.complaintFeedbackType === 'string' ? note.complaint.complaintFeedbackType : null,
      }),
    );
  }
  return [];
}
