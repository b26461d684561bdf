import type { SlybroadcastConfig } from '../../config.ts';
import type { Db } from '../../db/database.ts';
import type { OutcomeReason } from '../../db/schema.ts';
import { ensureSecret } from '../../db/secrets.ts';
import type { Clock } from '../../time.ts';
import { zonedInstant } from '../calling-hours.ts';
import type { ProviderOutcome } from '../dispositions.ts';
import { describeFetchError, type SubmitResult, type VoicemailAdapter } from '../providers.ts';

/**
 * Slybroadcast (PROVIDERS.md): one form-encoded endpoint, plain-text replies, and a disposition
 * callback per number posted to the `c_dispo_url` given with the drop. One number per submission,
 * so each delivery has its own session id, which is how its disposition finds it again.
 */
export const SLYBROADCAST_SOURCE = 'slybroadcast';
const SUBMIT_TIMEOUT_MS = 30_000;

/**
 * The secret in the disposition URL. Slybroadcast does not sign its callbacks, so the URL carries
 * a random token kept in the database (the same for every process, and across restarts).
 */
const tokens = new WeakMap<Db, Promise<string>>();
export function slybroadcastCallbackToken(db: Db, clock: Clock): Promise<string> {
  let token = tokens.get(db);
  if (!token) {
    token = ensureSecret(db, 'slybroadcast-callback-token', clock(), 24).then((secret) => secret.toString('base64url'));
    token.catch(() => tokens.delete(db));
    tokens.set(db, token);
  }
  return token;
}

export function slybroadcastAdapter(config: SlybroadcastConfig, dispositionUrl: () => Promise<string>): VoicemailAdapter {
  return {
    provider: 'Slybroadcast',
    async submit(drop) {
      // The body holds the account password: it is never logged, and neither are errors quoting it.
      const form = new URLSearchParams({
        c_uid: config.uid,
        c_password: config.password,
        c_phone: drop.phone,
        c_url: drop.audioUrl,
        c_audio: drop.audioType,
        c_callerID: drop.callerId,
        c_date: 'now',
        c_dispo_url: await dispositionUrl(),
        // Ringless voicemail is for mobile phones: Slybroadcast removes landlines ("Landline Removed").
        ...(config.mobileOnly ? { mobile_only: '1' } : {}),
      });
      let response: Response;
      let text: string;
      try {
        response = await fetch(config.url, { method: 'POST', body: form, signal: AbortSignal.timeout(SUBMIT_TIMEOUT_MS) });
        text = await response.text();
      } catch (error) {
        return { ok: false, retryable: true, reason: `Slybroadcast could not be reached: ${describeFetchError(error)}` };
      }
      if (response.status >= 500 || response.status === 408 || response.status === 429) {
        return { ok: false, retryable: true, reason: `Slybroadcast answered HTTP ${response.status}` };
      }
      if (!response.ok) return { ok: false, retryable: false, reason: `Slybroadcast answered HTTP ${response.status}` };
      return readSubmitReply(text);
    },
  };
}

/**
 * The plain-text reply: `OK` then `session_id=<digits>` (any case; `Session ID=` seen too), or
 * `ERROR` then the reason. HTTP 200 with `ERROR` is a refusal of this drop: not retried. A reply
 * that is neither is not retried either — the drop may have been accepted, and a second one to
 * the same person is worse than none.
 */
function readSubmitReply(text: string): SubmitResult {
  const lines = text
    .replace(/^\uFEFF/, '')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const first = lines[0] ?? '';
  if (/^OK\b/i.test(first)) {
    const sessionId = lines.map((line) => /^session[ _]?id\s*[=:]\s*"?([\w-]+)/i.exec(line)?.[1]).find((id) => id !== undefined);
    return { ok: true, reference: sessionId };
  }
  if (/^ERROR\b/i.test(first)) {
    const reason = lines[1] ?? first.replace(/^ERROR\W*/i, '');
    // A refusal that names the number (a Do-Not-Call hit, a landline) is classified as its disposition would be.
    return {
      ok: false,
      retryable: false,
      reason: `Slybroadcast refused the drop: ${reason || 'no reason given'}`,
      outcome: { ...slybroadcastOutcome('ERROR', reason), ...(/\b(c_|audio|user|password)/i.test(reason) ? { suppress: false } : {}) },
    };
  }
  return {
    ok: false,
    retryable: false,
    reason: `Slybroadcast gave a reply that is neither OK nor ERROR: ${JSON.stringify(first.slice(0, 80))}`,
  };
}

/**
 * The `var` values of a disposition post, each one or more lines of
 * `session_id|phone|status|failure_reason|delivery_time|carrier` (values may be quoted; the
 * session may be written `session_id=NNN`, as `callstatus` answers). Lines without a failure reason
 * or a carrier have fewer columns: the delivery time is the column that reads as one, the carrier
 * the one after it. A status still in progress (`SLYBROADCAST_PENDING`) is not an outcome. Lines
 * that are not that shape are counted as malformed and otherwise ignored.
 */
export function readDispositions(values: readonly string[], now: Date): { outcomes: ProviderOutcome[]; malformed: number } {
  const outcomes: ProviderOutcome[] = [];
  let malformed = 0;
  for (const line of values.flatMap((value) => value.split(/\r?\n/))) {
    if (line.trim() === '') continue;
    // Quotes may wrap the whole line or each value: stripped from both ends of every value.
    const fields = line.split('|').map((field) => field.trim().replace(/^["']/, '').replace(/["']$/, '').trim());
    const [first = '', phone = '', status = ''] = fields;
    const sessionId = first.replace(/^session[ _]?id\s*[=:]\s*/i, '');
    const digits = phone.replace(/\D/g, '').replace(/^1(\d{10})$/, '$1');
    if (fields.length < 3 || !/^[\w-]{1,64}$/.test(sessionId) || !/^\d{10}$/.test(digits) || status === '') {
      malformed++;
      continue;
    }
    if (SLYBROADCAST_PENDING.test(status)) continue;
    const rest = fields.slice(3);
    const timeAt = rest.findIndex((field) => easternTime(field) !== undefined);
    const failureReason = (timeAt >= 0 ? rest.slice(0, timeAt) : rest.slice(0, 1)).filter((f) => f !== '').join(' ');
    const deliveryTime = timeAt >= 0 ? (rest[timeAt] ?? '') : '';
    const carrier = (timeAt >= 0 ? rest[timeAt + 1] : rest[2]) ?? '';
    const outcome = slybroadcastOutcome(status, failureReason);
    const delivered = outcome.classification === 'delivered';
    outcomes.push({
      reference: sessionId,
      eventId: sessionId,
      phone: digits,
      delivered,
      reason: delivered ? (carrier ? `carrier: ${carrier}` : null) : failureReason || `status ${status}`,
      outcome,
      occurredAt: easternTime(deliveryTime) ?? now,
    });
  }
  return { outcomes, malformed };
}

/** Status words of a drop still queued or calling: not an outcome yet. */
const SLYBROADCAST_PENDING = /^(pending|queued|in ?progress|calling|scheduled|running|paused|processing)$/i;
/** Status words of a voicemail left. */
const SLYBROADCAST_DELIVERED = /^(ok|delivered|success|successful|completed?|sent)$/i;

/**
 * Slybroadcast's words in Hopper's classes (docs/outcomes.md, "Slybroadcast"), read from the status
 * and the failure reason together: the status column of its results carries the removals
 * ("Landline Removed", "Do Not Dial List Removed"), the reason column the failures. A landline, a
 * Do-Not-Call hit or a dead number is permanent: the number is suppressed.
 */
const SLYBROADCAST_CLASSES: readonly [RegExp, string, boolean][] = [
  [/landline/i, 'landline', true],
  [/do[ -]?not[ -]?(dial|call)|\bdnc\b|\bdnd\b/i, 'dnc', true],
  [/invalid|bad (phone )?number|disconnected|not in service|wrong number|non-?working|unallocated/i, 'invalid_number', true],
  [/(mail ?box|voice ?mail) (is )?full|\bfull\b/i, 'mailbox_full', false],
  [/no voice ?mail|voice ?mail not (set|found)|not set up/i, 'no_voicemail_box', false],
  [/duplicate/i, 'duplicate', false],
  [/carrier|busy|network|time ?out|no answer|unreachable|congest/i, 'carrier_failure', false],
  [/cancel|stopped/i, 'cancelled', false],
];

function slybroadcastOutcome(status: string, failureReason: string): OutcomeReason {
  const words = [status, failureReason].filter((w) => w !== '').join(': ');
  if (SLYBROADCAST_DELIVERED.test(status))
    return { classification: 'delivered', permanent: false, code: status, description: failureReason || null };
  const text = `${status} ${failureReason}`;
  const match = SLYBROADCAST_CLASSES.find(([pattern]) => pattern.test(text));
  const [, classification, permanent] = match ?? [undefined, 'failed', false];
  return { classification, permanent, code: status, description: words, ...(permanent ? { suppress: true } : {}) };
}

/** `YYYY-MM-DD HH:MM:SS` in US Eastern time, as Slybroadcast writes times. */
function easternTime(text: string): Date | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})$/.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) return undefined;
  return zonedInstant('America/New_York', year, month, day, hour, minute, second);
}

/**
 * A control call on the same endpoint (`c_option` = `stop`, `callstatus`, …): the account's
 * credentials and the option's fields, form-encoded; the plain-text reply. Throws when the
 * gateway cannot be reached or answers other than 2xx.
 */
export async function slybroadcastControl(config: SlybroadcastConfig, option: string, fields: Record<string, string>): Promise<string> {
  const form = new URLSearchParams({ c_uid: config.uid, c_password: config.password, c_option: option, ...fields });
  let response: Response;
  try {
    response = await fetch(config.url, { method: 'POST', body: form, signal: AbortSignal.timeout(SUBMIT_TIMEOUT_MS) });
  } catch (error) {
    throw new Error(`Slybroadcast could not be reached: ${describeFetchError(error)}`);
  }
  const text = await response.text();
  if (!response.ok) throw new Error(`Slybroadcast answered HTTP ${response.status}`);
  return text;
}

/**
 * The answer to `c_option=callstatus` for one session and number. PROVIDERS.md documents the
 * option but not its reply; both forms seen are read: lines shaped as the disposition callback's
 * (`session_id|phone|status|…`), and the same with the session written `session_id=NNN|phone|…`,
 * after an `OK` line or without one. The line of this session and number is taken; a status still
 * in progress, `ERROR`, or anything else is no answer yet.
 */
export function readCallStatus(text: string, sessionId: string, phone: string, now: Date): ProviderOutcome | undefined {
  if (/^\s*ERROR\b/i.test(text)) return undefined;
  const lines = text.split(/\r?\n/).filter((line) => line.includes('|'));
  const { outcomes } = readDispositions(lines, now);
  return outcomes.find((o) => o.reference === sessionId && o.phone === phone);
}
