import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import nodemailer from 'nodemailer';
import addressparser from 'nodemailer/lib/addressparser';
import MailComposer from 'nodemailer/lib/mail-composer';
import type { Config } from '../config.ts';
import type { DeliveryOutcome, HandOver } from '../sending/channel.ts';
import type { Clock } from '../time.ts';
import { classificationOf, failureReason, findStatus, isHardReason } from './bounce-reason.ts';
import { composeMime } from './compose-mime.ts';
import type { DkimSigner } from './dkim.ts';
import { RelayBackoff, slowDownAnswer } from './relay-backoff.ts';
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

/**
 * The transport of SMTP_URL, or the outbox; every message's Date header says `clock()`'s time.
 * A relay that asks to slow down is left alone for a while (relay-backoff.ts): the deliveries that
 * would have gone meanwhile answer `throttled` without reaching it, and a forward is refused.
 */
export function createMailTransport(config: Config, clock: Clock, log?: FastifyBaseLogger): MailTransport {
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
    const backoff = new RelayBackoff(config.smtpBackoffBaseMs);
    // The signer (mailauth) is loaded only when DKIM is configured: it costs seconds of start-up.
    const dkim = config.dkim;
    const signer: Promise<DkimSigner> | undefined = dkim ? import('./dkim.ts').then((m) => m.createDkimSigner(dkim)) : undefined;
    const sign = async (raw: string | Buffer, from: string) => (signer ? (await signer)(raw, from) : raw);
    /**
     * Sends through the pool unless the relay is being left alone. What the back-off holds back,
     * or a slow-down answer, is thrown with `throttledMs`: how long to wait before trying again.
     */
    const relay = async (email: OutgoingEmail, handOver?: HandOver): Promise<void> => {
      const admission = await backoff.admit();
      if (!admission.go) throw Object.assign(new Error(admission.reason), { throttledMs: admission.waitMs });
      try {
        const date = clock();
        const { envelope, raw } = composeMime(email, date) ?? (await composeWithNodemailer(email, date));
        await pool.send(envelope, await sign(raw, addressOf(email.from)), handOver);
        noteChange(backoff.answered(admission.ticket, { kind: 'answered' }), log);
      } catch (error) {
        const slowDown = slowDownAnswer(error as Error);
        const answered = (error as { responseCode?: number }).responseCode !== undefined;
        const { waitMs, change } = backoff.answered(admission.ticket, slowDown ?? { kind: answered ? 'answered' : 'no-answer' });
        noteChange({ waitMs, change, reason: slowDown?.reason }, log);
        throw slowDown ? Object.assign(error as Error, { throttledMs: waitMs }) : error;
      }
    };
    return {
      async send(email, _deliveryId, handOver) {
        try {
          await relay(email, handOver);
          return { kind: 'sent', providerMessageId: email.messageId };
        } catch (error) {
          const { throttledMs, responseCode, response, message } = error as Error & {
            throttledMs?: number;
            responseCode?: number;
            response?: string;
          };
          if (throttledMs === undefined) return classifySmtpError(error as Error);
          return { kind: 'throttled', retryInMs: throttledMs, error: response ?? message, refused: responseCode !== undefined };
        }
      },
      forward: (email) => relay(email),
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

/** The log's word on a back-off begun or ended. */
function noteChange(
  { waitMs, change, reason }: { waitMs: number; change: 'backed-off' | 'reopened' | null; reason?: string },
  log: FastifyBaseLogger | undefined,
): void {
  if (change === 'backed-off')
    log?.warn({ waitMs, reply: reason }, 'the SMTP relay asked to slow down: no new attempt until the back-off ends');
  else if (change === 'reopened') log?.info('the SMTP relay takes mail again: sending resumes');
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
