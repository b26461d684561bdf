import { sql } from 'kysely';
import type { Db } from '../db/database.ts';

/**
 * Password guessing is slowed down per account and per remote address: at most MAX_PER_ACCOUNT
 * passwords are checked for one email (MAX_PER_ADDRESS from one address) within WINDOW_MS, unless
 * one of them was right; further attempts are refused, without checking the password, until the
 * oldest that counts ages out.
 *
 * An attempt is reserved before its password is checked, under a lock on its subjects, and counts
 * as a failure from that moment; a right password gives the reservation back. So parallel guesses
 * cannot all pass the check before any of them is recorded: 200 at once check at most the limit.
 *
 * The counters are rows in the database rather than process memory: API processes are stateless
 * and may be many behind a load balancer (docs/operations.md), and a restart must not reset them.
 * The account counter is keyed by the email as typed (lower-cased), known or not, so throttling
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

/** An attempt may go ahead (its reservation, to give back if the password was right), or must wait. */
type SignInAttempt = { ok: true; reserved: number[] } | { ok: false; waitSeconds: number };

/** Reserves one password check for this email from this address, or says how long to wait first. */
export async function reserveSignInAttempt(db: Db, email: string, address: string, now: Date): Promise<SignInAttempt> {
  const windowStart = new Date(now.getTime() - WINDOW_MS);
  return db.transaction().execute(async (trx) => {
    let waitMs = 0;
    for (const { subject, limit } of subjects(email, address)) {
      // Attempts on one subject are counted and reserved one at a time, in every process.
      await sql`SELECT pg_advisory_xact_lock(hashtext(${`hopper:sign-in:${subject}`}))`.execute(trx);
      // The limit-th most recent attempt in the window: once it ages out, fewer than `limit` remain.
      const blocking = await trx
        .selectFrom('web_sign_in_failures')
        .select('failed_at')
        .where('subject', '=', subject)
        .where('failed_at', '>', windowStart)
        .orderBy('failed_at', 'desc')
        .offset(limit - 1)
        .limit(1)
        .executeTakeFirst();
      if (blocking) waitMs = Math.max(waitMs, blocking.failed_at.getTime() + WINDOW_MS - now.getTime());
    }
    if (waitMs > 0) return { ok: false, waitSeconds: Math.ceil(waitMs / 1000) };
    const rows = await trx
      .insertInto('web_sign_in_failures')
      .values(subjects(email, address).map(({ subject }) => ({ subject, failed_at: now })))
      .returning('id')
      .execute();
    // Rows outside the window never count again; dropping them here keeps the table small without a job.
    await trx.deleteFrom('web_sign_in_failures').where('failed_at', '<=', windowStart).execute();
    return { ok: true, reserved: rows.map((row) => row.id) };
  });
}

/**
 * A right password: the attempt's reservation is given back, and the account's earlier failures
 * are forgiven (the address's stay: it may be guessing others).
 */
export async function signInSucceeded(db: Db, email: string, reserved: readonly number[]): Promise<void> {
  await db
    .deleteFrom('web_sign_in_failures')
    .where((eb) => eb.or([eb('id', 'in', reserved), eb('subject', '=', subjects(email, '')[0].subject)]))
    .execute();
}
