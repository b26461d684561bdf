import { timingSafeEqual } from 'node:crypto';
import type { DeliveryEvent, DeliveryEventType } from '../sending/delivery-events.ts';

/**
 * Postmark's bounce and spam complaint webhooks: HTTP basic credentials the operator set in both
 * places, and the record read into a delivery event. The delivery is the `hopper_delivery_id`
 * metadata every Hopper email carries (`X-PM-Metadata-hopper_delivery_id`, render.ts).
 */
export function credentialsMatch(header: string | undefined, expected: { user: string; password: string }): boolean {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header ?? '');
  if (!match) return false;
  const given = Buffer.from(Buffer.from(match[1] as string, 'base64').toString('utf8'));
  const wanted = Buffer.from(`${expected.user}:${expected.password}`);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/** Postmark bounce types: permanent ones retire the address, the others are temporary. */
const HARD = new Set(['HardBounce', 'BadEmailAddress', 'ManuallyDeactivated', 'AddressChange']);
const SOFT = new Set(['SoftBounce', 'Transient', 'DnsError', 'Blocked', 'SMTPApiError', 'InboundError', 'ChallengeVerification']);

type PostmarkRead = { event: DeliveryEvent } | { ignored: string };

export function readPostmarkRecord(record: unknown, now: Date): PostmarkRead {
  if (!record || typeof record !== 'object' || Array.isArray(record)) return { ignored: 'not a record' };
  const r = record as Record<string, unknown>;
  const deliveryText = String((r.Metadata as Record<string, unknown> | undefined)?.hopper_delivery_id ?? '');
  if (!/^[1-9]\d{0,14}$/.test(deliveryText)) return { ignored: 'no hopper_delivery_id metadata' };
  let type: DeliveryEventType;
  if (r.RecordType === 'SpamComplaint') type = 'spamreport';
  else if (r.RecordType === 'Bounce' && HARD.has(String(r.Type))) type = 'hard_bounce';
  else if (r.RecordType === 'Bounce' && SOFT.has(String(r.Type))) type = 'temporary_bounce';
  else return { ignored: `record type ${String(r.RecordType)}/${String(r.Type)}` };
  const id = typeof r.ID === 'number' || typeof r.ID === 'string' ? String(r.ID) : '';
  if (!id) return { ignored: 'no ID' };
  const at = new Date(String(r.BouncedAt ?? ''));
  return {
    event: {
      source: 'postmark',
      eventId: `${type}:${id}`.slice(0, 255),
      deliveryId: Number(deliveryText),
      address: typeof r.Email === 'string' ? r.Email : null,
      type,
      occurredAt: Number.isNaN(at.getTime()) ? now : at,
      detail:
        typeof r.Description === 'string' ? r.Description.slice(0, 2000) : typeof r.Details === 'string' ? r.Details.slice(0, 2000) : null,
    },
  };
}
