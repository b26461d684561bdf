import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { DropCowboyConfig } from '../../config.ts';
import type { ProviderOutcome } from '../dispositions.ts';
import { describeFetchError, type VoicemailAdapter } from '../providers.ts';

/**
 * Drop Cowboy, API v2 (PROVIDERS.md): a JSON POST per drop authenticated by `x-key`/`x-secret`,
 * answered `202 {"status":"queued","message_id":…}`, and outcomes posted back to a signed webhook.
 * Every submission carries an `Idempotency-Key` derived from the delivery, so a retry after a lost
 * reply or a crash never drops twice (Drop Cowboy keeps keys for 24 hours; the body is the same
 * on every try).
 */
export const DROPCOWBOY_SOURCE = 'dropcowboy';
export const DROPCOWBOY_MAX_SKEW_SECONDS = 300;
const SUBMIT_TIMEOUT_MS = 30_000;

/** Readable reasons for Drop Cowboy's `reason_code`s; others are shown by number. */
const REASONS: Record<string, string> = {
  '0': 'Left in the mailbox',
  '3000': 'Drop Cowboy account has insufficient funds',
  '4001': 'No voicemail box is set up on this number',
  '4002': 'The voicemail box is full',
  '6011': 'Drop Cowboy has no consent on file for this number',
};

/** The same for every try of one delivery, and distinct between Hopper installations sharing an account. */
export function idempotencyKey(publicUrl: string, deliveryId: number): string {
  const installation = createHash('sha256').update(publicUrl).digest('hex').slice(0, 12);
  return `hopper-${installation}-delivery-${deliveryId}`;
}

export function dropCowboyAdapter(config: DropCowboyConfig, publicUrl: string): VoicemailAdapter {
  return {
    provider: 'Drop Cowboy',
    async submit(drop) {
      const body = JSON.stringify({
        to: `+1${drop.phone}`,
        audio_url: drop.audioUrl,
        caller_id: `+1${drop.callerId}`,
        foreign_id: String(drop.deliveryId),
        callback_url: `${publicUrl}/v3/webhooks/dropcowboy`,
      });
      let response: Response;
      let text: string;
      try {
        response = await fetch(config.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json',
            'x-key': config.key,
            'x-secret': config.secret,
            'idempotency-key': idempotencyKey(publicUrl, drop.deliveryId),
          },
          body,
          signal: AbortSignal.timeout(SUBMIT_TIMEOUT_MS),
        });
        text = await response.text();
      } catch (error) {
        return { ok: false, retryable: true, reason: `Drop Cowboy could not be reached: ${describeFetchError(error)}` };
      }
      const reply = parseJson(text);
      if (response.ok) {
        const messageId = reply?.message_id;
        return { ok: true, reference: typeof messageId === 'string' || typeof messageId === 'number' ? String(messageId) : undefined };
      }
      const said = typeof reply?.message === 'string' ? reply.message : typeof reply?.error === 'string' ? reply.error : undefined;
      const reason = `Drop Cowboy answered HTTP ${response.status}${said ? `: ${said.slice(0, 200)}` : ''}`;
      // 409: a try with this key is still in progress at Drop Cowboy; the next try gets its answer.
      const retryable = response.status >= 500 || [408, 409, 425, 429].includes(response.status);
      return { ok: false, retryable, reason };
    },
  };
}

/**
 * Checks `X-Signature: sha256=<hex>` = HMAC-SHA256(secret, timestamp + "." + raw body) and that
 * `X-Timestamp` (Unix seconds) is within 300 s of now, which stops a captured post being replayed
 * later.
 */
export function checkDropCowboySignature(
  secret: string,
  headers: { timestamp: string | undefined; signature: string | undefined },
  raw: Buffer,
  now: Date,
): { ok: true } | { ok: false; reason: string } {
  const { timestamp, signature } = headers;
  if (!timestamp || !/^\d{1,13}$/.test(timestamp)) return { ok: false, reason: 'X-Timestamp is missing or not Unix seconds' };
  if (!signature) return { ok: false, reason: 'X-Signature is missing' };
  const given = /^sha256=([0-9a-f]{64})$/i.exec(signature.trim())?.[1];
  if (!given) return { ok: false, reason: 'X-Signature is not sha256=<hex>' };
  const expected = createHmac('sha256', secret).update(`${timestamp}.`).update(raw).digest();
  if (!timingSafeEqual(expected, Buffer.from(given, 'hex'))) return { ok: false, reason: 'the signature does not match' };
  const seconds = Number(timestamp) > 1e11 ? Number(timestamp) / 1000 : Number(timestamp);
  if (Math.abs(now.getTime() / 1000 - seconds) > DROPCOWBOY_MAX_SKEW_SECONDS) {
    return { ok: false, reason: `X-Timestamp is more than ${DROPCOWBOY_MAX_SKEW_SECONDS} s away from now` };
  }
  return { ok: true };
}

/**
 * Outcome events of a webhook body: one event object, an array of them, or `{events: […]}`. Each
 * needs an `event_id` and names its drop by `foreign_id` (the delivery id Hopper sent) or
 * `message_id`; `status` `success` with `reason_code` 0 means left in the mailbox. Events of
 * other kinds, and events missing those fields, are counted as ignored.
 */
export function readDropCowboyEvents(body: unknown, now: Date): { outcomes: ProviderOutcome[]; ignored: number } {
  const list = Array.isArray(body) ? body : isObject(body) && Array.isArray(body.events) ? body.events : [body];
  const outcomes: ProviderOutcome[] = [];
  let ignored = 0;
  for (const event of list) {
    const outcome = isObject(event) ? readEvent(event, now) : undefined;
    if (outcome) outcomes.push(outcome);
    else ignored++;
  }
  return { outcomes, ignored };
}

function readEvent(event: Record<string, unknown>, now: Date): ProviderOutcome | undefined {
  const eventId = scalar(event.event_id);
  const foreignId = scalar(event.foreign_id);
  const messageId = scalar(event.message_id);
  const status = scalar(event.status)?.toLowerCase();
  const code = scalar(event.reason_code);
  if (!eventId || (!foreignId && !messageId) || (status !== 'success' && status !== 'failure')) return undefined;
  const deliveryId = foreignId && /^\d{1,15}$/.test(foreignId) ? Number(foreignId) : undefined;
  const delivered = status === 'success' && (code === undefined || code === '0');
  const known = code === undefined ? undefined : REASONS[code];
  const text = scalar(event.reason) ?? scalar(event.reason_text);
  const reason = delivered
    ? (known ?? null)
    : `${known ?? `Drop Cowboy reason code ${code ?? 'missing'}`}${text && text !== known ? ` (${text})` : ''}`;
  const phone = scalar(event.to) ?? scalar(event.phone_number);
  const digits = phone?.replace(/\D/g, '').replace(/^1(\d{10})$/, '$1');
  return {
    eventId,
    ...(deliveryId !== undefined ? { deliveryId } : { reference: messageId }),
    delivered,
    reason,
    occurredAt: timestampOf(event.timestamp) ?? now,
    ...(digits && /^\d{10}$/.test(digits) ? { phone: digits } : {}),
  };
}

function timestampOf(value: unknown): Date | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return new Date(value > 1e11 ? value : value * 1000);
  if (typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(value)) {
    const date = new Date(value);
    return Number.isNaN(date.getTime()) ? undefined : date;
  }
  return undefined;
}

function scalar(value: unknown): string | undefined {
  if (typeof value === 'string') return value.trim() === '' ? undefined : value.trim().slice(0, 500);
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}
