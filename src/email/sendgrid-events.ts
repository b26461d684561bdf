import { type KeyObject, verify } from 'node:crypto';
import type { DeliveryEvent, DeliveryEventType } from '../sending/delivery-events.ts';

/**
 * SendGrid's Event Webhook (PROVIDERS.md "SendGrid Event Webhook"): checking that a post really
 * comes from SendGrid, and reading its events as delivery events.
 */

/** How far a post's signed timestamp may lie from our clock: bounds how long a captured post can be replayed. */
const MAX_CLOCK_SKEW_MS = 10 * 60_000;

type SignatureCheck = { ok: true } | { ok: false; reason: string };

/**
 * ECDSA P-256 / SHA-256 over the timestamp header's value followed directly by the raw body, the
 * signature base64 DER. The timestamp is Unix seconds and must lie within `MAX_CLOCK_SKEW_MS` of
 * `now` (SendGrid signs each attempt afresh, retries included).
 */
export function checkSignature(
  key: KeyObject,
  headers: { timestamp: string | undefined; signature: string | undefined },
  body: Buffer,
  now: Date,
): SignatureCheck {
  const { timestamp, signature } = headers;
  if (!timestamp || !signature) return { ok: false, reason: 'missing signature or timestamp header' };
  if (!/^\d{1,12}$/.test(timestamp)) return { ok: false, reason: 'timestamp is not Unix seconds' };
  if (Math.abs(now.getTime() - Number(timestamp) * 1000) > MAX_CLOCK_SKEW_MS) return { ok: false, reason: 'timestamp too far from now' };
  let valid = false;
  try {
    valid = verify(
      'sha256',
      Buffer.concat([Buffer.from(timestamp, 'utf8'), body]),
      { key, dsaEncoding: 'der' },
      Buffer.from(signature, 'base64'),
    );
  } catch {
    valid = false; // not a DER signature at all
  }
  return valid ? { ok: true } : { ok: false, reason: 'signature does not match' };
}

/** SendGrid event names and what Hopper records for each; `bounce` depends on its `type`. */
const TYPE_OF: Record<string, DeliveryEventType | ((event: SendgridEvent) => DeliveryEventType)> = {
  processed: 'processed',
  delivered: 'delivered',
  deferred: 'deferred',
  dropped: 'dropped',
  // `type: blocked` is a refusal of this message (soft); `bounce` (or none, in older payloads) is hard.
  bounce: (event) => (event.type === 'blocked' ? 'soft_bounce' : 'hard_bounce'),
  open: 'open',
  click: 'click',
  spamreport: 'spamreport',
  unsubscribe: 'unsubscribe',
  group_unsubscribe: 'unsubscribe',
};
/** Known events that move nothing in Hopper: it sends no unsubscribe groups to resubscribe to. */
const UNUSED = new Set(['group_resubscribe']);

type SendgridEvent = Record<string, unknown>;

interface ReadBatch {
  events: DeliveryEvent[];
  /** Events skipped here: malformed, of a type Hopper does not use, or without a Hopper delivery id. */
  ignored: number;
  /** Event names nobody knows, with how often each came (logged: SendGrid may have added one). */
  unknownTypes: Map<string, number>;
  /** Events carrying no `hopper_delivery_id` (mail sent through the same account by something else). */
  withoutDelivery: number;
}

const DELIVERY_ID = /^[1-9]\d{0,14}$/;
const MAX_DETAIL = 2000;
const MAX_EVENT_ID = 255;

/**
 * Reads a webhook batch into delivery events (source `sendgrid`, identity `sg_event_id`). The
 * delivery is the `hopper_delivery_id` custom argument every Hopper email carries (render.ts);
 * `email` goes along so the recorder can check it is that delivery's address.
 */
export function readSendgridBatch(batch: readonly unknown[], now: Date): ReadBatch {
  const read: ReadBatch = { events: [], ignored: 0, unknownTypes: new Map(), withoutDelivery: 0 };
  for (const item of batch) {
    const event = (item && typeof item === 'object' && !Array.isArray(item) ? item : {}) as SendgridEvent;
    const name = typeof event.event === 'string' ? event.event : '';
    const eventId = cleanText(event.sg_event_id);
    const mapping = Object.hasOwn(TYPE_OF, name) ? TYPE_OF[name] : undefined;
    if (!mapping) {
      read.ignored++;
      const label = name.slice(0, 64) || '(none)';
      if (!UNUSED.has(name)) read.unknownTypes.set(label, (read.unknownTypes.get(label) ?? 0) + 1);
      continue;
    }
    const deliveryId = String(event.hopper_delivery_id ?? '');
    if (!DELIVERY_ID.test(deliveryId)) {
      read.ignored++;
      read.withoutDelivery++;
      continue;
    }
    if (!eventId || eventId.length > MAX_EVENT_ID) {
      read.ignored++;
      continue;
    }
    read.events.push({
      source: 'sendgrid',
      eventId,
      deliveryId: Number(deliveryId),
      address: cleanText(event.email) ?? null,
      type: typeof mapping === 'function' ? mapping(event) : mapping,
      occurredAt: occurredAt(event.timestamp, now),
      detail: detailOf(name, event),
    });
  }
  return read;
}

/** What is worth keeping with the event: why it bounced, was dropped or deferred; which link was clicked. */
function detailOf(name: string, event: SendgridEvent): string | null {
  const text = name === 'click' ? cleanText(event.url) : (cleanText(event.reason) ?? cleanText(event.response));
  return text ? text.slice(0, MAX_DETAIL) : null;
}

function occurredAt(timestamp: unknown, now: Date): Date {
  const seconds = typeof timestamp === 'number' ? timestamp : typeof timestamp === 'string' ? Number(timestamp) : Number.NaN;
  // Anything outside 2000–2100 is not a time SendGrid meant.
  return Number.isFinite(seconds) && seconds > 946_684_800 && seconds < 4_102_444_800 ? new Date(seconds * 1000) : now;
}

/** A string without NUL characters (PostgreSQL text cannot hold them), or undefined. */
function cleanText(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const text = value.replaceAll('\u0000', '').trim();
  return text === '' ? undefined : text;
}
