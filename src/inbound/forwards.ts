import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { DeliveryFacts, ReplyAuthentication } from '../db/schema.ts';
import { escapeHtml, type OutgoingEmail, subjectFor } from '../email/render.ts';
import { mailFromAddress, type SenderIdentity, senderIdentity } from '../email/sender-identity.ts';
import type { MailTransport } from '../email/transport.ts';
import { findSenderFields } from '../identity/users.ts';
import { findDeliveredEmail } from '../sending/deliveries.ts';

/**
 * The one way a contact's reply reaches the agent's own mailbox: the receiver forwards a reply as
 * it arrives (inbound-messages.ts), and a held reply the agent releases (held-replies.ts) goes the
 * same way, from what Hopper kept of it.
 */
export interface ForwardDeps {
  db: Db;
  config: Config;
  transport: MailTransport;
}

/** What a forward carries of a reply. */
export interface ForwardSource {
  /** The sender's address as the reply's From gave it; the delivery's address when it gave none. */
  fromAddress: string | undefined;
  /** The sender's display name as the reply's From gave it ('' for none). */
  fromName: string;
  subject: string | undefined;
  text: string;
  /** The reply's own HTML; undefined: its text, shown as it is. */
  html: string | undefined;
  attachments: NonNullable<OutgoingEmail['attachments']>;
  /** The Message-IDs the reply names (its References and In-Reply-To), as they came. */
  thread: string;
  authentication: ReplyAuthentication | undefined;
  /** A line of Hopper's own, after the one naming the email answered (a release says it was held). */
  note: string | undefined;
}

/**
 * The contact's answer to the agent's own mailbox, through the relay, with the contact as
 * Reply-To: its attachments, threaded to the email it answers (In-Reply-To and References name
 * that email's Message-ID), a first line naming that email by its subject, and the receiver's
 * SPF/DKIM/DMARC verdict in Authentication-Results (a sender DMARC could not confirm is said so
 * in that first line too). `senders` keeps each owner's sender identity for a batch's forwards.
 */
export async function forwardToAgent(
  deps: ForwardDeps,
  replyId: number,
  delivery: DeliveryFacts,
  source: ForwardSource,
  senders: Map<number, Promise<SenderIdentity>> = new Map(),
): Promise<void> {
  const { db, config, transport } = deps;
  let identity = senders.get(delivery.user_id);
  if (!identity) {
    identity = findSenderFields(db, delivery.user_id).then((owner) => {
      if (!owner) throw new Error(`the owner of delivery ${delivery.id} is gone`);
      return senderIdentity(owner, config);
    });
    senders.set(delivery.user_id, identity);
  }
  const sender = await identity;
  const contactAddress = source.fromAddress || delivery.address;
  const name = displayName(source.fromName);
  const contactName = name || contactAddress;
  const host = new URL(config.publicUrl).hostname;
  const original = `<${delivery.message_kind}-${delivery.message_id}.${delivery.id}@${host}>`;
  const email = delivery.message_kind === 'templated_email' ? await findDeliveredEmail(db, delivery.id) : undefined;
  const answered = email ? subjectFor(email, email) : undefined;
  const who = name ? `${name} <${contactAddress}>` : contactAddress;
  const auth = source.authentication;
  const notes = [
    answered === undefined ? `${who} replied to your email.` : `${who} replied to your email “${answered}”.`,
    ...(source.note ? [source.note] : []),
    ...(auth && auth.dmarc !== 'pass'
      ? [
          `Hopper could not confirm that this message comes from ${contactAddress} (SPF ${auth.spf}, DKIM ${auth.dkim}, DMARC ${auth.dmarc}).`,
        ]
      : []),
  ];
  const html = source.html ?? `<pre>${escapeHtml(source.text)}</pre>`;
  await transport.forward(
    {
      messageId: `<reply-${replyId}@${host}>`,
      from: { name: `${contactName} via Hopper`, address: sender.from.address },
      replyTo: { name, address: contactAddress },
      envelope: { from: mailFromAddress(config.mailFrom) },
      to: sender.own.address,
      subject: source.subject?.trim() ? source.subject : answered ? `Re: ${answered}` : '(no subject)',
      inReplyTo: original,
      references: references(original, source.thread),
      text: `${notes.join('\n')}\n\n${source.text}`,
      html: `${notes.map((n) => `<p style="color:#555">${escapeHtml(n)}</p>`).join('')}\n${html}`,
      attachments: source.attachments,
      ...(auth?.results
        ? { headers: { 'Authentication-Results': { prepared: true, foldLines: true, value: auth.results } as never } }
        : {}),
    },
    `reply-${replyId}`,
  );
}

/** Longest display name a forward shows: enough for any person's name, not for a paragraph. */
const MAX_DISPLAY_NAME = 64;

/**
 * A sender's display name as the forward shows it, in its From (`<name> via Hopper`), Reply-To
 * and first line: the name the sender chose is theirs to choose, so nothing in it may pass for an
 * address or change how the line reads — a name `"CEO <ceo@bank.example>"` would put the bank's
 * address in front of the agent. Angle-bracketed parts and words with an `@` are dropped, quotes
 * and brackets removed, control and invisible formatting characters (bidirectional overrides,
 * zero-width spaces) taken out, spaces collapsed, the length bounded. Empty when nothing is left:
 * the sender's real address is shown instead.
 */
function displayName(raw: string): string {
  const cleaned = raw
    .normalize('NFKC')
    .replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, ' ')
    .replace(/<[^>]*>?/g, ' ')
    .split(/\s+/)
    // NFKC has made the full-width and small commercial ats plain ones.
    .filter((word) => !word.includes('@'))
    .join(' ')
    .replace(/["<>\\]/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  return [...cleaned].slice(0, MAX_DISPLAY_NAME).join('').trim();
}

/** The email answered, then the thread the contact's message names (its References and In-Reply-To), at most 20 ids. */
function references(original: string, thread: string): string[] {
  const named = thread.match(/<[^<>\s]{1,250}>/g) ?? [];
  return [...new Set([original, ...named])].slice(0, 20);
}
