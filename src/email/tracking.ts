import type { Db } from '../db/database.ts';
import { findDeliveredEmail } from '../sending/deliveries.ts';
import { type DeliveryEvent, type DeliveryEventType, recordDeliveryEvents } from '../sending/delivery-events.ts';
import { composeHtml, linksIn } from './render.ts';

/**
 * What the open pixel, click redirects and unsubscribe link of an email record. Each is a delivery
 * event of source `hopper` whose id is derived from the delivery, so each is stored — and counted
 * — once per delivery, however often the pixel loads or the link is followed:
 *
 * - `open`: the recipient opened the email at least once (unique opens). A click is also an open:
 *   the image may have been blocked, but the email was read.
 * - `click`: the recipient followed at least one link (unique clicks); the event keeps the first
 *   URL followed.
 * - `unsubscribe`: the recipient unsubscribed through this email; the contact becomes
 *   `Unsubscribed` (if it was still `Subscribed`).
 */
export const TRACKING_SOURCE = 'hopper';

function event(deliveryId: number, type: DeliveryEventType, now: Date, detail: string | null = null): DeliveryEvent {
  return { source: TRACKING_SOURCE, eventId: `${type}:${deliveryId}`, deliveryId, type, occurredAt: now, detail };
}

export async function recordOpen(db: Db, deliveryId: number, now: Date): Promise<void> {
  await recordDeliveryEvents(db, [event(deliveryId, 'open', now)], now);
}

export async function recordClick(db: Db, deliveryId: number, url: string, now: Date): Promise<void> {
  await recordDeliveryEvents(db, [event(deliveryId, 'open', now), event(deliveryId, 'click', now, url)], now);
}

/** False when there is no such delivery (nothing recorded). Repeating it changes nothing. */
export async function recordUnsubscribe(db: Db, deliveryId: number, now: Date): Promise<boolean> {
  const result = await recordDeliveryEvents(db, [event(deliveryId, 'unsubscribe', now)], now);
  return result.unknown === 0;
}

/**
 * The URL behind link `index` of the email a delivery carried, found by composing that email again
 * (the same function the sender used) and taking its index-th http(s) link. Only a URL written in
 * the message can come out, so the redirect is never open. Undefined when there is no such
 * delivery or link.
 */
export async function findClickTarget(db: Db, deliveryId: number, index: number): Promise<string | undefined> {
  const row = await findDeliveredEmail(db, deliveryId);
  if (!row) return undefined;
  const link = linksIn(composeHtml({ message: row, signatureHtml: row.signature_body }, row))[index];
  if (link === undefined) return undefined;
  try {
    const url = new URL(link);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}
