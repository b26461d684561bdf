import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * What Drop Cowboy posts back, read as its own repository documents it
 * (`Drop-Cowboy/dropcowboy`: examples/api/CONTRACT.md, docs/concepts/webhooks.md and
 * send-results.md, the fixtures in examples/api/fixtures/):
 *
 * - signed webhooks, `{event_id, event, event_at (ms), data: {status, reason, reason_code, to,
 *   from, drop_id, contact_id, …}}`, events `contact.rvm.status` and `contact.rvm.receipt` (the
 *   latter with `proof_of_delivery_url`); no `foreign_id`, no `message_id`;
 * - the per-send `callback_url` post, unsigned, flat, echoing `foreign_id`.
 */
const DROPCOWBOY_MAX_SKEW_SECONDS = 300;

type SignatureCheck = { ok: true } | { ok: false; code: 'missing_signature' | 'stale_timestamp' | 'invalid_signature' };

/**
 * CONTRACT.md's check: `X-Signature: sha256=<hex HMAC-SHA256(secret, X-Timestamp + "." + raw
 * body)>`, any configured secret may match (one per webhook), `X-Timestamp` (Unix seconds) within
 * 300 s of now, `X-Signature-Version` absent or `v1`. The codes are the contract's.
 */
export function verifyDropCowboySignature(
  secrets: readonly string[],
  headers: { signature: string | undefined; timestamp: string | undefined; version: string | undefined },
  raw: Buffer,
  nowSeconds: number,
): SignatureCheck {
  const { signature, timestamp, version } = headers;
  if (!signature || !timestamp) return { ok: false, code: 'missing_signature' };
  if (version !== undefined && version.trim() !== 'v1') return { ok: false, code: 'invalid_signature' };
  if (!/^\d{1,12}$/.test(timestamp.trim())) return { ok: false, code: 'stale_timestamp' };
  if (Math.abs(nowSeconds - Number(timestamp.trim())) > DROPCOWBOY_MAX_SKEW_SECONDS) return { ok: false, code: 'stale_timestamp' };
  const given = /^sha256=([0-9a-f]{64})$/i.exec(signature.trim())?.[1];
  if (!given) return { ok: false, code: 'invalid_signature' };
  const givenBytes = Buffer.from(given, 'hex');
  let matched = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(`${timestamp.trim()}.`).update(raw).digest();
    // Every secret is compared, in constant time each: which one matched leaks nothing.
    if (timingSafeEqual(expected, givenBytes)) matched = true;
  }
  return matched ? { ok: true } : { ok: false, code: 'invalid_signature' };
}

/** A result as both channels carry it. */
export interface DropCowboyResult {
  status: string | undefined;
  reasonCode: number | undefined;
  reason: string | undefined;
  /** The recipient, E.164. */
  to: string | undefined;
  dropId: string | undefined;
  proofUrl: string | undefined;
}

export interface DropCowboyWebhookEvent extends DropCowboyResult {
  eventId: string;
  event: string;
  occurredAt: Date | undefined;
}

/** One webhook body; undefined when it is not an event object (no `event_id` or `event`). */
export function readDropCowboyWebhook(body: unknown, headerEventId: string | undefined): DropCowboyWebhookEvent | undefined {
  if (!isObject(body)) return undefined;
  const eventId = text(body.event_id) ?? headerEventId;
  const event = text(body.event);
  if (!eventId || !event) return undefined;
  const data = isObject(body.data) ? body.data : {};
  const eventAt = typeof body.event_at === 'number' && Number.isFinite(body.event_at) ? new Date(body.event_at) : undefined;
  return { eventId, event, occurredAt: eventAt && !Number.isNaN(eventAt.getTime()) ? eventAt : undefined, ...readResult(data, 'to') };
}

interface DropCowboyCallback extends DropCowboyResult {
  foreignId: string | undefined;
  occurredAt: Date | undefined;
}

/** The per-send callback body (flat; the number is `phone_number`). */
export function readDropCowboyCallback(body: Record<string, unknown>): DropCowboyCallback {
  const at = text(body.attempt_date);
  const occurredAt = at && /^\d{4}-\d{2}-\d{2}T/.test(at) ? new Date(at) : undefined;
  return {
    foreignId: text(body.foreign_id),
    occurredAt: occurredAt && !Number.isNaN(occurredAt.getTime()) ? occurredAt : undefined,
    ...readResult(body, 'phone_number'),
  };
}

function readResult(data: Record<string, unknown>, numberField: string): DropCowboyResult {
  const code = data.reason_code;
  const reasonCode =
    typeof code === 'number' && Number.isInteger(code)
      ? code
      : typeof code === 'string' && /^\d{1,6}$/.test(code)
        ? Number(code)
        : undefined;
  const proof = text(data.proof_of_delivery_url);
  return {
    status: text(data.status)?.toLowerCase(),
    reasonCode,
    reason: text(data.reason),
    to: e164(text(data[numberField]) ?? text(data.to)),
    dropId: text(data.drop_id),
    proofUrl: proof && /^https:\/\//i.test(proof) ? proof : undefined,
  };
}

/**
 * What a result means for the delivery. Drop Cowboy says to branch on `reason_code`, never on the
 * text: 0 is a voicemail left in the mailbox; any other code failed, worded so the operator knows
 * what to fix. Undefined when the result says neither (no code and no final status).
 */
export function outcomeOf(result: DropCowboyResult): { delivered: boolean; reason: string | null } | undefined {
  const code = result.reasonCode;
  if (code === undefined) {
    if (result.status === 'success') return { delivered: true, reason: null };
    if (result.status === 'failure')
      return { delivered: false, reason: `Drop Cowboy: failure${result.reason ? ` (${result.reason})` : ''}` };
    return undefined;
  }
  if (code === 0) return { delivered: true, reason: null };
  const known = REASONS[code];
  const said = result.reason ? ` (Drop Cowboy said: ${result.reason})` : '';
  return { delivered: false, reason: `${known ?? `Drop Cowboy reason code ${code}`}${known ? ` [reason code ${code}]` : ''}${said}` };
}

/** Drop Cowboy's reason codes (docs/concepts/send-results.md) with what the operator does about each. */
const REASONS: Record<number, string> = {
  3000: 'The Drop Cowboy account has no funds: add funds, then send the drop again',
  3001: 'Drop Cowboy could not use the audio: check the media item is an MP3 or WAV that plays, or remove the remembered upload',
  3007: 'Drop Cowboy refused the API key or secret: fix DROPCOWBOY_KEY and DROPCOWBOY_SECRET',
  3014: "audio_url is not enabled on this Drop Cowboy account: unset DROPCOWBOY_AUDIO_URL so Hopper uploads the audio (media_id), or ask Drop Cowboy's support to enable it",
  3027: 'Drop Cowboy saw this Idempotency-Key before with another body; nothing was sent',
  3028: 'Drop Cowboy refused the Idempotency-Key as invalid; nothing was sent',
  3040: 'The Drop Cowboy account is in testing mode and this is not one of its test numbers',
  4001: 'No voicemail box is set up on this number (not retried)',
  4002: 'The voicemail box is full (not retried)',
  4010: 'Drop Cowboy has no phone line to send from: set DROPCOWBOY_PHONE_LINE_ID or a default line on the account',
  6011: 'Drop Cowboy has no consent on file for this number: record the opt-in first',
};

/** A NANP number as Hopper sends it (`+1` and ten digits), whatever its punctuation; else as given. */
function e164(value: string | undefined): string | undefined {
  if (!value) return undefined;
  const digits = value.replace(/[^\d]/g, '');
  if (/^\d{10}$/.test(digits)) return `+1${digits}`;
  if (/^1\d{10}$/.test(digits)) return `+${digits}`;
  return value;
}

function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value.trim() === '' ? undefined : value.trim().slice(0, 500);
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
