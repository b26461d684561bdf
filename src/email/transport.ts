import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import addressparser from 'nodemailer/lib/addressparser';
import MailComposer from 'nodemailer/lib/mail-composer';
import type { Config } from '../config.ts';
import type { DeliveryOutcome, HandOver } from '../sending/channel.ts';
import type { Clock } from '../time.ts';
import { classificationOf, failureReason, findStatus, isHardReason } from './bounce-reason.ts';
import { composeMime } from './compose-mime.ts';
import type { DkimSigner } from './dkim.ts';
import type { OutgoingEmail } from './render.ts';
import { SmtpPool } from './smtp-pool.ts';

/** Where rendered emails go: a pooled SMTP connection, or `.eml` files in DATA_DIR/outbox. */
export interface MailTransport {
  /** Sends one delivery; `handOver` is awaited before the message is committed to (see Channel). */
  send(email: OutgoingEmail, deliveryId: number, handOver?: HandOver): Promise<DeliveryOutcome>;
  /** Sends an email that is no delivery (a reply forwarded to its sender); throws when it is not accepted. */
  forward(email: OutgoingEmail, name: string): Promise<void>;
  close(): void;
}

/**
 * SMTP replies decide what a failure is: 4xx is temporary (retried with backoff, counted as
 * deferred), 5xx is permanent for that recipient — a bounce, hard (the contact retired) only when
 * the words and status say the address itself is bad (user or host unknown, moved, not accepting
 * mail: bounce-reason.ts), soft otherwise (a full mailbox, a block, a DMARC or policy refusal).
 * Connection problems are temporary.
 */
function classifySmtpError(error: {
  responseCode?: number;
  code?: string;
  response?: string;
  message: string;
  command?: string;
}): DeliveryOutcome {
  const detail = error.response ?? error.message;
  const code = error.responseCode;
  if (code !== undefined && code >= 500) {
    const status = findStatus(detail);
    const command = /^(RCPT|MAIL|DATA|EHLO|HELO)\b/.exec(error.command ?? '')?.[1] ?? null;
    const reason = failureReason({ status, replyCode: String(code), command, diagnostic: detail, action: 'failed' });
    const hard = isHardReason(reason);
    return {
      kind: 'failed',
      error: detail,
      bounce: true,
      ...(hard ? { contactStatus: 'Inactive - Hard Bounce' as const } : {}),
      outcome: {
        classification: classificationOf(reason),
        permanent: hard,
        code: status ?? String(code),
        description: detail,
        source: 'smtp',
      },
    };
  }
  // 4xx, and network trouble on either side of the exchange: worth another try.
  return { kind: 'deferred', error: detail };
}

/** The transport of SMTP_URL, or the outbox; every message's Date header says `clock()`'s time. */
export function createMailTransport(config: Config, clock: Clock): MailTransport {
  if (config.smtpUrl) {
    const pool = new SmtpPool({
      url: config.smtpUrl,
      name: ehloName(config.publicUrl),
      maxConnections: config.smtpMaxConnections,
      rateLimit: config.smtpRateLimit,
      connectionTimeout: 15_000,
      greetingTimeout: 15_000,
      socketTimeout: 60_000,
    });
    // The signer (mailauth) is loaded only when DKIM is configured: it costs seconds of start-up.
    const dkim = config.dkim;
    const signer: Promise<DkimSigner> | undefined = dkim ? import('./dkim.ts').then((m) => m.createDkimSigner(dkim)) : undefined;
    const sign = async (raw: string | Buffer, from: string) => (signer ? (await signer)(raw, from) : raw);
    return {
      async send(email, _deliveryId, handOver) {
        try {
          const date = clock();
          const { envelope, raw } = composeMime(email, date) ?? (await composeWithNodemailer(email, date));
          await pool.send(envelope, await sign(raw, addressOf(email.from)), handOver);
          return { kind: 'sent', providerMessageId: email.messageId };
        } catch (error) {
          return classifySmtpError(error as Error);
        }
      },
      async forward(email) {
        const date = clock();
        const { envelope, raw } = composeMime(email, date) ?? (await composeWithNodemailer(email, date));
        await pool.send(envelope, await sign(raw, addressOf(email.from)));
      },
      close: () => pool.close(),
    };
  }

  // No SMTP: one RFC 5322 file per delivery, named after it, so sending a delivery again rewrites
  // the same file instead of adding one.
  const outbox = join(config.dataDir, 'outbox');
  const files = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  const write = async (email: OutgoingEmail, name: string) => {
    const info = await files.sendMail({ ...email, date: clock() });
    await mkdir(outbox, { recursive: true });
    const target = join(outbox, `${name}.eml`);
    await writeFile(`${target}.tmp`, info.message as Buffer);
    await rename(`${target}.tmp`, target);
  };
  return {
    async send(email, deliveryId, handOver) {
      await handOver?.();
      await write(email, String(deliveryId));
      return { kind: 'sent', providerMessageId: email.messageId };
    },
    forward: (email, name) => write(email, name),
    close: () => files.close(),
  };
}

/** PUBLIC_URL's host as EHLO names it: a domain as it is, an address literal in brackets (RFC 5321 4.1.3). */
function ehloName(publicUrl: string): string {
  const host = new URL(publicUrl).hostname;
  if (host.startsWith('[')) return `[IPv6:${host.slice(1, -1)}]`;
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(host) ? `[${host}]` : host;
}

/** The bare address of a From given as text or as `{ name, address }`. */
function addressOf(from: OutgoingEmail['from']): string {
  if (typeof from === 'string') return addressparser(from, { flatten: true })[0]?.address ?? '';
  return (from && !Array.isArray(from) ? from.address : '') ?? '';
}

/**
 * What compose-mime.ts does not cover (attachments, several recipients, non-ASCII or quoted
 * addresses, …), composed by nodemailer. An envelope that names only the sender (VERP, a forward's
 * MAIL_FROM) keeps the recipients of the headers: nodemailer alone would send it to no one ("No
 * recipients defined").
 */
async function composeWithNodemailer(email: OutgoingEmail, date: Date): Promise<{ envelope: { from: string; to: string[] }; raw: Buffer }> {
  const mime = new MailComposer({ ...email, date }).compile();
  const { from, to } = mime.getEnvelope();
  const recipients = to.length > 0 || !email.envelope ? to : new MailComposer({ ...email, envelope: undefined }).compile().getEnvelope().to;
  return { envelope: { from: from || '', to: recipients }, raw: await mime.build() };
}
