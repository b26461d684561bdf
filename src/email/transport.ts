import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer';
import type { Config } from '../config.ts';
import type { DeliveryOutcome } from '../sending/channel.ts';
import { composeMime } from './compose-mime.ts';
import type { OutgoingEmail } from './render.ts';
import { SmtpPool } from './smtp-pool.ts';

/** Where rendered emails go: a pooled SMTP connection, or `.eml` files in DATA_DIR/outbox. */
export interface MailTransport {
  send(email: OutgoingEmail, deliveryId: number): Promise<DeliveryOutcome>;
  close(): void;
}

/**
 * SMTP replies decide what a failure is: 4xx is temporary (retried with backoff, counted as
 * deferred), 5xx is permanent for that recipient (a bounce; 5.1.x and 550/551/553 name a bad
 * address, which also retires the contact). Connection problems are temporary.
 */
export function classifySmtpError(error: { responseCode?: number; code?: string; response?: string; message: string }): DeliveryOutcome {
  const detail = error.response ?? error.message;
  const code = error.responseCode;
  if (code !== undefined && code >= 500) {
    const badAddress = [550, 551, 553].includes(code) || /\b5\.1\.\d\b/.test(detail);
    return { kind: 'failed', error: detail, bounce: true, ...(badAddress ? { contactStatus: 'Inactive - Hard Bounce' as const } : {}) };
  }
  // 4xx, and network trouble on either side of the exchange: worth another try.
  return { kind: 'deferred', error: detail };
}

export function createMailTransport(config: Config): MailTransport {
  if (config.smtpUrl) {
    const pool = new SmtpPool({
      url: config.smtpUrl,
      maxConnections: config.smtpMaxConnections,
      rateLimit: config.smtpRateLimit,
      connectionTimeout: 15_000,
      greetingTimeout: 15_000,
      socketTimeout: 60_000,
    });
    return {
      async send(email) {
        try {
          const { envelope, raw } = composeMime(email, new Date()) ?? (await composeWithNodemailer(email));
          await pool.send(envelope, raw);
          return { kind: 'sent', providerMessageId: email.messageId };
        } catch (error) {
          return classifySmtpError(error as Error);
        }
      },
      close: () => pool.close(),
    };
  }

  // No SMTP: one RFC 5322 file per delivery, named after it, so sending a delivery again rewrites
  // the same file instead of adding one.
  const outbox = join(config.dataDir, 'outbox');
  const files = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  return {
    async send(email, deliveryId) {
      const info = await files.sendMail(email);
      await mkdir(outbox, { recursive: true });
      const target = join(outbox, `${deliveryId}.eml`);
      await writeFile(`${target}.tmp`, info.message as Buffer);
      await rename(`${target}.tmp`, target);
      return { kind: 'sent', providerMessageId: email.messageId };
    },
    close: () => files.close(),
  };
}

/** What compose-mime.ts does not cover (attachments, several recipients, …), composed by nodemailer. */
async function composeWithNodemailer(email: OutgoingEmail): Promise<{ envelope: { from: string; to: string[] }; raw: Buffer }> {
  const mime = new MailComposer(email).compile();
  const { from, to } = mime.getEnvelope();
  return { envelope: { from: from || '', to }, raw: await mime.build() };
}
