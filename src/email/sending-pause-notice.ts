import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { activeAdministrators, findUser, fullName, type SendingPause } from '../identity/users.ts';
import type { Clock } from '../time.ts';
import type { MailTransport } from './transport.ts';

const percent = (fraction: number) => `${(fraction * 100).toFixed(2).replace(/\.?0+$/, '')} %`;

/**
 * The email telling a paused user and every Administrator why the brakes stopped the user's
 * sending and how it starts again (docs/sending.md, "Brakes"), one to each address. A failure to
 * mail is logged: the pause stands either way, and shows on the user (`sending_paused`) and in its
 * `user.sending_paused` webhook event.
 */
export async function mailSendingPaused(
  deps: { db: Db; config: Config; clock: Clock; log: FastifyBaseLogger; mail: MailTransport },
  userId: number,
  pause: SendingPause,
): Promise<void> {
  const { db, config, mail, log } = deps;
  const user = await findUser(db, userId);
  if (!user) return;
  const brakes = config.brakes;
  const days = Math.round(brakes.windowMs / 86_400_000);
  const what =
    pause.reason === 'complaint_rate'
      ? `spam reports reached ${percent(pause.complaintRate)} of the emails delivered (the limit is ${percent(brakes.complaintRate)})`
      : `hard bounces reached ${percent(pause.hardBounceRate)} of the emails sent (the limit is ${percent(brakes.hardBounceRate)})`;
  const text = [
    `Hopper paused the sending of ${fullName(user)} (${user.email}): over the last ${days} days, ${what}.`,
    '',
    'Gmail, Yahoo and Microsoft send the mail of a domain above such rates to spam, or refuse it, for every',
    'sender of that domain. Until sending is resumed, scheduled emails and voicemail drops stay Scheduled',
    'and nothing more goes out; nothing is lost.',
    '',
    'Before resuming, look at the list: contacts who never asked for these emails complain, and old',
    'addresses bounce. An Administrator resumes with',
    `POST ${config.publicUrl}/v3/users/${user.id}/sending/resume — what was held then goes out, and the`,
    'pause comes back at the next message while the rates stay over.',
  ].join('\n');
  const recipients = new Set([user.email, ...(await activeAdministrators(db)).map((admin) => admin.email)]);
  for (const to of recipients) {
    await mail
      .forward(
        {
          from: config.mailFrom,
          to,
          subject: `Sending paused for ${fullName(user)}: ${pause.reason === 'complaint_rate' ? 'spam complaints' : 'hard bounces'}`,
          text,
          messageId: `<${randomUUID()}@${new URL(config.publicUrl).hostname}>`,
        },
        `sending-paused-${user.id}-${deps.clock().getTime()}`,
      )
      .catch((error: unknown) => log.warn({ err: error, user: user.id, to }, 'the email about a paused sender failed'));
  }
}
