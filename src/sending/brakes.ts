import type { BrakeConfig } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { JobQueue } from '../db/job-queue.ts';
import type { UserRow } from '../db/schema.ts';
import { type Principal, requireRank } from '../identity/access.ts';
import { RANK } from '../identity/roles.ts';
import { pauseSending, resumeSending, type SendingPause, sendingPauseOf } from '../identity/users.ts';
import { heldMessagesOf } from '../messages/message-tables.ts';
import { type SenderTotals, senderTotals } from '../messages/reporting.ts';

/**
 * The complaint and bounce brakes (docs/sending.md, "Brakes"). Gmail and Yahoo judge a sender's
 * whole domain by its spam-complaint rate (under 0.3 %, Google's Postmaster Tools) and refuse or
 * junk its mail above it; a list full of dead addresses does the same through hard bounces. So
 * before a user's message starts, and before each batch of it, the user's last 30 days are
 * weighed: at least `minimumSent` emails and drops, and spam reports above `complaintRate` of those
 * the relay accepted, or hard bounces above `hardBounceRate` of those sent, pause the user's
 * sending — what is scheduled stays `Scheduled`, what is sending stops between batches — until an
 * Administrator resumes it. Resuming lets go what was held until then; anything due after it is
 * weighed again, so the pause comes back while the rates stay over (nothing new sent to dilute
 * them).
 */
interface SenderRates {
  /** Emails and drops handed over in the window: accepted, or refused (`failed`). */
  sent: number;
  /** Spam reports per one accepted (a fraction). */
  complaintRate: number;
  /** Hard bounces per one sent (a fraction). */
  hardBounceRate: number;
}

function senderRates(totals: SenderTotals | undefined): SenderRates {
  if (!totals) return { sent: 0, complaintRate: 0, hardBounceRate: 0 };
  const sent = totals.sent + totals.failed;
  return {
    sent,
    complaintRate: totals.sent > 0 ? totals.spamreport / totals.sent : 0,
    hardBounceRate: sent > 0 ? totals.hard_bounce / sent : 0,
  };
}

/** The pause the rates call for, if any: complaints first (the rate inbox providers judge). */
function pauseFor(brakes: BrakeConfig, rates: SenderRates): SendingPause | undefined {
  if (rates.sent < brakes.minimumSent) return undefined;
  const measured = { complaintRate: round(rates.complaintRate), hardBounceRate: round(rates.hardBounceRate) };
  if (rates.complaintRate > brakes.complaintRate) return { reason: 'complaint_rate', ...measured };
  if (rates.hardBounceRate > brakes.hardBounceRate) return { reason: 'hard_bounce_rate', ...measured };
  return undefined;
}

const round = (fraction: number) => Math.round(fraction * 1e6) / 1e6;

/**
 * Whether a message of `userId` must wait: the user is paused, or the rates pause them now
 * (`paused` is then called, once per pause). What a resume let go goes: a due job the resume made
 * (`released`), and a message sending on that was due before the last resume (`sendAt`).
 */
export async function mustWait(
  db: Db,
  brakes: BrakeConfig,
  userId: number,
  message: { sendAt: Date | null } | 'released',
  now: Date,
  paused?: (userId: number, pause: SendingPause) => void,
): Promise<boolean> {
  const state = await sendingPauseOf(db, userId);
  if (!state) return false;
  if (state.sending_paused_at) return true;
  if (message === 'released') return false;
  const resumedAt = state.sending_resumed_at?.getTime();
  if (resumedAt !== undefined && message.sendAt && message.sendAt.getTime() <= resumedAt) return false;
  const [totals] = await senderTotals(db, new Date(now.getTime() - brakes.windowMs), userId);
  const pause = pauseFor(brakes, senderRates(totals));
  if (!pause) return false;
  if (await pauseSending(db, userId, pause, now)) paused?.(userId, pause);
  return true;
}

/**
 * `POST /v3/users/{id}/sending/resume` (an Administrator): lifts the pause and lets go what it
 * held — scheduled messages already due get their due job again, sending ones a delivery job —
 * in one transaction.
 */
export async function resumeUserSending(
  ctx: { db: Db; queue: JobQueue },
  principal: Principal,
  user: UserRow,
  now: Date,
): Promise<UserRow> {
  requireRank(principal, RANK.Administrator, "resume a user's sending");
  const sending: { kind: 'templated_email' | 'voicemail_drop'; id: number }[] = [];
  const resumed = await ctx.db.transaction().execute(async (trx) => {
    const row = await resumeSending(trx, user.id, now);
    for (const message of await heldMessagesOf(trx, user.id, now)) {
      if (message.status === 'Scheduled' && message.send_at) {
        await ctx.queue.scheduleDue(trx, { kind: message.kind, id: message.id, sendAt: message.send_at.toISOString(), released: true });
      } else sending.push({ kind: message.kind, id: message.id });
    }
    return row ?? user;
  });
  for (const message of sending) await ctx.queue.requestDelivery(message);
  return resumed;
}

/** Every user's rates over the window, for /metrics. */
export async function ratesOfSenders(db: Db, brakes: BrakeConfig, now: Date): Promise<({ userId: number } & SenderRates)[]> {
  const totals = await senderTotals(db, new Date(now.getTime() - brakes.windowMs));
  return totals.map((t) => ({ userId: t.user_id, ...senderRates(t) }));
}
