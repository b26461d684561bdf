import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { Channel } from '../sending/channel.ts';
import { type PreparedEmail, renderEmail } from './render.ts';
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
      return { message, signatureHtml: signatureHtml ?? null, from: config.mailFrom, domain, publicUrl: config.publicUrl, tokens };
    },
    deliver: (prepared, delivery) => transport.send(renderEmail(prepared, delivery), delivery.id),
    close: async () => transport.close(),
  };
}
