import type { Config } from '../../config.ts';
import type { Db } from '../../db/database.ts';
import { latestDomainCheck } from '../../email/domain-watch.ts';
import { senderIdentity } from '../../email/sender-identity.ts';
import { findUser } from '../../identity/users.ts';
import { formatForUser } from '../render.ts';

/** Each record of a domain check by its name on the page, in the order shown. */
const RECORD_NAMES: Record<string, string> = {
  spf: 'SPF',
  dkim: 'DKIM',
  dmarc: 'DMARC',
  mx: 'MX (replies come back to Hopper)',
  return_path: 'SPF of the bounce address (Return-Path)',
};
const VERDICT_WORDS: Record<string, string> = { ok: 'Set up', missing: 'Missing', wrong: 'Wrong' };

const percent = (fraction: number) => `${(fraction * 100).toLocaleString('en-US', { maximumFractionDigits: 2 })} %`;

/**
 * The dashboard's sender health: the last DNS check of the domain the user's emails go out from
 * (their From: their own address's domain when it is one of SENDER_DOMAINS, else MAIL_FROM's),
 * as the daily watch of DKIM_DOMAIN or `GET /v3/domains/{domain}/check` left it in this process
 * (email/domain-watch.ts), each record's verdict in words with the value to publish; and whether
 * a brake paused their sending (sending/brakes.ts), with what to do.
 */
export async function senderHealth(db: Db, config: Config, userId: number, timeZone: string) {
  const user = await findUser(db, userId);
  if (!user) return null;
  const from = senderIdentity(user, config).from.address;
  const domain = from.slice(from.lastIndexOf('@') + 1).toLowerCase();
  const check = latestDomainCheck(config, domain);
  const brakes = config.brakes;
  const paused = user.sending_paused_at
    ? {
        since: formatForUser(user.sending_paused_at, timeZone),
        why:
          user.sending_paused_reason === 'hard_bounce_rate'
            ? `hard bounces reached ${percent(user.sending_paused_hard_bounce_rate ?? 0)} of the emails sent over the last 30 days, over the ${percent(brakes.hardBounceRate)} limit`
            : `spam complaints reached ${percent(user.sending_paused_complaint_rate ?? 0)} of the emails delivered over the last 30 days, over the ${percent(brakes.complaintRate)} limit`,
        what:
          user.sending_paused_reason === 'hard_bounce_rate'
            ? 'Remove the addresses that bounced (they are on the Suppressions page) and old addresses you have not mailed for a long time, then ask an Administrator to resume your sending.'
            : 'Mail only the people who asked for your emails, make Unsubscribe easy to find, then ask an Administrator to resume your sending.',
      }
    : null;
  return {
    domain,
    checkedAt: check ? formatForUser(new Date(check.checked_at), timeZone) : null,
    records: (check?.records ?? []).map((r) => ({
      name: RECORD_NAMES[r.type] ?? r.type,
      ok: r.status === 'ok',
      verdict: VERDICT_WORDS[r.status] ?? r.status,
      detail: r.detail,
      publish: r.status === 'ok' ? null : r.expected && { at: r.name, value: r.expected },
    })),
    paused,
  };
}
