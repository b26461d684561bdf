import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { findSenderFields } from '../identity/users.ts';
import type { Channel } from '../sending/channel.ts';
import { type PreparedEmail, renderEmail } from './render.ts';
import { senderIdentity } from './sender-identity.ts';
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
      const owner = await findSenderFields(db, message.user_id);
      if (!owner) throw new Error(`the owner of templated email ${message.id} is gone`);
      return {
        message,
        signatureHtml: signatureHtml ?? null,
        sender: senderIdentity(owner, config),
        inboundDomain: config.inbound?.domain,
        trackOpens: config.trackOpens,
        domain,
        publicUrl: config.publicUrl,
        relay: config.smtpRelay,
        tokens,
      };
    },
    deliver: (prepared, delivery, handOver) => transport.send(renderEmail(prepared, delivery), delivery.id, handOver),
    close: async () => transport.close(),
  };
}
