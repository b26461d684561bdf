import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { Channel } from '../sending/channel.ts';
import { type PreparedEmail, renderEmail } from './render.ts';
import { senderIdentity } from './sender.ts';
import { findSignatureBody } from './signatures.ts';
import type { TrackingTokens } from './tokens.ts';
import type { MailTransport } from './transport.ts';

/**
 * Templated emails: each delivery rendered for its contact and handed to the mail transport.
 * `tokens` signs the open pixel, click redirects and unsubscribe link of every email.
 */
export function emailChannel(
  db: Db,
  config: Config,
  transport: MailTransport,
  tokens: TrackingTokens,
): Channel<'templated_email', PreparedEmail> {
  const domain = new URL(config.publicUrl).hostname;
  return {
    async prepare(message) {
      const signatureHtml =
        message.signature_id === null
          ? undefined
          : await findSignatureBody(db, message.user_id, message.signature_id, { evenDeleted: true });
      const owner = await db
        .selectFrom('users')
        .select(['first_name', 'last_name', 'email', 'sender_name', 'sender_email', 'postal_address'])
        .where('id', '=', message.user_id)
        .executeTakeFirstOrThrow();
      return {
        message,
        signatureHtml: signatureHtml ?? null,
        sender: senderIdentity(owner, config),
        inboundDomain: config.inbound?.domain,
        trackOpens: config.trackOpens,
        domain,
        publicUrl: config.publicUrl,
        tokens,
      };
    },
    deliver: (prepared, delivery, handOver) => transport.send(renderEmail(prepared, delivery), delivery.id, handOver),
    close: async () => transport.close(),
  };
}
