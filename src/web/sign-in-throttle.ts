import type { Db } from '../db/database.ts';

/**
 * Failed sign-ins slow password guessing down, per account and per remote address: after
 * MAX_PER_ACCOUNT failures for one email (or MAX_PER_ADDRESS from one address) within WINDOW_MS,
 * further attempts are refused, without checking the password, until the oldest failure that
 * counts ages out.
 *
 * The counters are rows in the database rather than process memory: API processes are stateless
 * and may be many behind a load balancer (DESIGN.md §2), and a restart must not reset them. The
 * account counter is keyed by the email as typed (lower-cased), known or not, so throttling
 * behaves the same for unknown emails and tells an attacker nothing about which accounts exist.
 * The address limit is higher because an office or a carrier NAT puts many people behind one IP.
 */
export const MAX_PER_ACCOUNT = 5;
export const MAX_PER_ADDRESS = 20;
export const WINDOW_MS = 15 * 60_000;

const subjects = (email: string, address: string) =>
  [
    { subject: `account:${email.trim().toLowerCase()}`, limit: MAX_PER_ACCOUNT },
    { subject: `address:${address}`, limit: MAX_PER_ADDRESS },
  ] as const;

/** Seconds to wait before the next attempt may be checked; 0 when it may go ahead. */
export async function signInWaitSeconds(db: Db, email: string, address: string, now: Date): Promise<number> {
  let waitMs = 0;
  for (const { subject, limit } of subjects(email, address)) {
    // The limit-th most recent failure in the window: once it ages out, fewer than `limit` remain.
    const blocking = await db
      .selectFrom('web_sign_in_failures')
      .select('failed_at')
      .where('subject', '=', subject)
      .where('failed_at', '>', new Date(now.getTime() - WINDOW_MS))
      .orderBy('failed_at', 'desc')
      .offset(limit - 1)
      .limit(1)
      .executeTakeFirst();
    if (blocking) waitMs = Math.max(waitMs, blocking.failed_at.getTime() + WINDOW_MS - now.getTime());
  }
  return Math.ceil(waitMs / 1000);
}

export async function recordSignInFailure(db: Db, email: string, address: string, now: Date): Promise<void> {
  await db
    .insertInto('web_sign_in_failures')
    .values(subjects(email, address).map(({ subject }) => ({ subject, failed_at: now })))
    .execute();
  // Rows outside the window never count again; dropping them here keeps the table small without a job.
  await db
    .deleteFrom('web_sign_in_failures')
    .where('failed_at', '<=', new Date(now.getTime() - WINDOW_MS))
    .execute();
}

/** A successful sign-in forgives the account's failures (the address's stay: it may be guessing others). */
export async function clearAccountFailures(db: Db, email: string): Promise<void> {
  await db.deleteFrom('web_sign_in_failures').where('subject', '=', subjects(email, '')[0].subject).execute();
}
