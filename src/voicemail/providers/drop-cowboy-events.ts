import { createHmac, timingSafeEqual } from 'node:crypto';
import type { OutcomeReason } from '../../db/schema.ts';

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

/** What a result means for the delivery: delivered or not, the operator's words, and the outcome (docs/outcomes.md). */
export interface DropCowboyOutcome {
  delivered: boolean;
  reason: string | null;
  outcome: OutcomeReason;
}

/**
 * What a result means for the delivery. Drop Cowboy says to branch on `reason_code`, never on the
 * text: 0 is a voicemail left in the mailbox; any other code failed, worded so the operator knows
 * what to fix, and classified by DROPCOWBOY_CODES. Undefined when the result says neither (no code
 * and no final status).
 */
export function outcomeOf(result: DropCowboyResult): DropCowboyOutcome | undefined {
  const code = result.reasonCode;
  const words = result.reason ?? null;
  if (code === undefined) {
    if (result.status === 'success')
      return { delivered: true, reason: null, outcome: { classification: 'delivered', permanent: false, description: words } };
    if (result.status === 'failure')
      return {
        delivered: false,
        reason: `Drop Cowboy: failure${result.reason ? ` (${result.reason})` : ''}`,
        outcome: { classification: 'failed', permanent: false, code: 'failure', description: words },
      };
    return undefined;
  }
  if (code === 0)
    return { delivered: true, reason: null, outcome: { classification: 'delivered', permanent: false, code: '0', description: words } };
  const known = DROPCOWBOY_CODES[code];
  const said = result.reason ? ` (Drop Cowboy said: ${result.reason})` : '';
  return {
    delivered: false,
    reason: `${known?.advice ?? `Drop Cowboy reason code ${code}`}${known ? ` [reason code ${code}]` : ''}${said}`,
    outcome: {
      classification: known?.classification ?? 'failed',
      permanent: known?.permanent ?? false,
      code: String(code),
      description: words ?? known?.words ?? null,
      ...(known?.permanent ? { suppress: true } : {}),
    },
  };
}

interface CodeClass {
  /** Hopper's class of the result (docs/outcomes.md, "Drop Cowboy"). */
  classification: string;
  /** The number is dead or may not be called: it is suppressed on the contact. */
  permanent: boolean;
  /** Drop Cowboy's own name of the code, when its result gives no words. */
  words: string;
  /** What the operator does about it. */
  advice: string;
}

/**
 * Drop Cowboy's reason codes (docs/concepts/send-results.md; 4004 is its test numbers' dead
 * number) in Hopper's classes, with what the operator does about each. A dead number, a missing
 * consent are permanent: the number is suppressed. A full or missing mailbox is about this drop.
 */
const DROPCOWBOY_CODES: Record<number, CodeClass> = {
  3000: {
    classification: 'account',
    permanent: false,
    words: 'Insufficient funds',
    advice: 'The Drop Cowboy account has no funds: add funds, then send the drop again',
  },
  3001: {
    classification: 'audio',
    permanent: false,
    words: 'Audio not usable',
    advice: 'Drop Cowboy could not use the audio: check the media item is an MP3 or WAV that plays, or remove the remembered upload',
  },
  3007: {
    classification: 'account',
    permanent: false,
    words: 'Invalid credentials',
    advice: 'Drop Cowboy refused the API key or secret: fix DROPCOWBOY_KEY and DROPCOWBOY_SECRET',
  },
  3014: {
    classification: 'configuration',
    permanent: false,
    words: 'audio_url not enabled',
    advice:
      "audio_url is not enabled on this Drop Cowboy account: unset DROPCOWBOY_AUDIO_URL so Hopper uploads the audio (media_id), or ask Drop Cowboy's support to enable it",
  },
  3027: {
    classification: 'configuration',
    permanent: false,
    words: 'Idempotency-Key reused with another body',
    advice: 'Drop Cowboy saw this Idempotency-Key before with another body; nothing was sent',
  },
  3028: {
    classification: 'configuration',
    permanent: false,
    words: 'Invalid Idempotency-Key',
    advice: 'Drop Cowboy refused the Idempotency-Key as invalid; nothing was sent',
  },
  3040: {
    classification: 'account',
    permanent: false,
    words: 'Testing mode',
    advice: 'The Drop Cowboy account is in testing mode and this is not one of its test numbers',
  },
  4001: {
    classification: 'no_voicemail_box',
    permanent: false,
    words: 'No voicemail set up',
    advice: 'No voicemail box is set up on this number (not retried)',
  },
  4002: { classification: 'mailbox_full', permanent: false, words: 'VoiceMail Full', advice: 'The voicemail box is full (not retried)' },
  4004: {
    classification: 'invalid_number',
    permanent: true,
    words: 'Number not reachable',
    advice: 'The number is not reachable: it is suppressed, later drops skip it',
  },
  4010: {
    classification: 'configuration',
    permanent: false,
    words: 'No phone line',
    advice: 'Drop Cowboy has no phone line to send from: set DROPCOWBOY_PHONE_LINE_ID or a default voice line on the account',
  },
  6011: {
    classification: 'no_consent',
    permanent: true,
    words: 'No consent on file',
    advice: 'Drop Cowboy has no consent on file for this number: it is suppressed until you record the opt-in and lift it',
  },
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
