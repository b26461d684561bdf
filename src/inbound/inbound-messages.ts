import type { ParsedMail } from 'mailparser';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { DeliveryFacts, ReplyAuthentication } from '../db/schema.ts';
import type { SenderIdentity } from '../email/sender-identity.ts';
import { TRACKING_SOURCE } from '../email/tracking.ts';
import type { MailTransport } from '../email/transport.ts';
import { findDeliveryFacts } from '../sending/deliveries.ts';
import { type DeliveryEvent, recordDeliveryEvents } from '../sending/delivery-events.ts';
import type { Clock } from '../time.ts';
import type { BounceReport } from './classify.ts';
import { type ForwardSource, forwardToAgent } from './forwards.ts';
import { type InboundMessage, markRepliesForwarded, storeInboundMessages } from './replies.ts';

/**
 * What an inbound message means, recorded for a batch of them: each message is stored once per
 * recipient address and Message-ID (inbound/replies.ts), its outcome goes through
 * `recordDeliveryEvents` like every other channel's (a reply counts once per delivery, a bounce or
 * complaint once per delivery), and a person's reply is forwarded to the sender before the SMTP
 * exchange ends; if the relay refuses it, the sending MTA is told to try again (451) and the retry
 * forwards it without counting it again.
 */
const INBOUND_SOURCE = 'dsn';

/**
 * What a message means for its delivery, by the address it came to and what it is
 * (receiver.ts): a person's reply (or an automatic one, kept but not counted), a bounce with its
 * report, a complaint (ARF `abuse` and the like), a mailed unsubscribe (the List-Unsubscribe
 * mailto, or an `opt-out` feedback report), or a report that changes nothing (an `auth-failure`
 * feedback report: about the sender's authentication, not the person's wish).
 */
export type Meaning =
  | { kind: 'reply'; autoReply: boolean }
  | { kind: 'bounce'; report: BounceReport }
  | { kind: 'complaint'; detail: string; effect: 'spamreport' | 'unsubscribe' | 'none' }
  | { kind: 'unsubscribe' };

/** One inbound message for one of our addresses, read and classified, waiting to be recorded. */
export interface ReceivedMessage {
  recipient: string;
  messageId: string;
  deliveryId: number;
  mail: ParsedMail;
  what: Meaning;
  /** SPF, DKIM and DMARC of a reply's sender (authentication.ts); undefined for what is no reply. */
  authentication: ReplyAuthentication | undefined;
  /**
   * A bounce or complaint counts (receiver.ts): from the null sender at the bounce address, or
   * from a known feedback loop. One that does not is kept, and changes nothing.
   */
  honoured: boolean;
}

interface RecordDeps {
  db: Db;
  config: Config;
  transport: MailTransport;
  clock: Clock;
}

/** Records a batch (see above); answers the messages whose reply the relay refused to forward, with why. */
export async function recordReceived(deps: RecordDeps, batch: readonly ReceivedMessage[]): Promise<Map<ReceivedMessage, unknown>> {
  const { db } = deps;
  const now = deps.clock();
  const deliveries = new Map((await findDeliveryFacts(db, [...new Set(batch.map((m) => m.deliveryId))])).map((d) => [d.id, d]));
  // The same message twice in one batch (or to two of our addresses) is one message per key.
  const unique = new Map<string, ReceivedMessage>();
  for (const m of batch) if (deliveries.has(m.deliveryId)) unique.set(`${m.recipient}\u0000${m.messageId}`, m);
  const received = [...unique.values()];
  if (received.length === 0) return new Map();

  const stored = new Map(received.map((m) => [toStored(m, deliveries.get(m.deliveryId) as DeliveryFacts), m]));
  const toForward = await storeInboundMessages(
    db,
    [...stored.keys()],
    now,
    deps.config.inbound?.forwardsPerDay ?? Number.POSITIVE_INFINITY,
  );
  // Every outcome through the one recorder; event ids make each count once per delivery, whatever
  // was stored before (a crash between the two statements loses nothing).
  await recordDeliveryEvents(
    db,
    received.flatMap((m) => eventsOf(m, now)),
    now,
  );

  // Forwards of the batch side by side, then one statement marks those that went out.
  const senders = new Map<number, Promise<SenderIdentity>>();
  const forwards = [...toForward].map(([message, replyId]) => {
    const m = stored.get(message) as ReceivedMessage;
    return { m, replyId, sent: forwardToAgent(deps, replyId, deliveries.get(m.deliveryId) as DeliveryFacts, forwardSourceOf(m), senders) };
  });
  const results = await Promise.allSettled(forwards.map((f) => f.sent));
  await markRepliesForwarded(
    db,
    forwards.filter((_, i) => results[i]?.status === 'fulfilled').map((f) => f.replyId),
    deps.clock(),
  );
  const failures = new Map<ReceivedMessage, unknown>();
  forwards.forEach((f, i) => {
    const result = results[i];
    if (result?.status === 'rejected') failures.set(f.m, result.reason);
  });
  return failures;
}

/** What a forward of a reply just received carries: the whole message (within INBOUND_MAX_BYTES), as it came. */
function forwardSourceOf(m: ReceivedMessage): ForwardSource {
  const mail = m.mail;
  const contact = mail.from?.value?.[0];
  return {
    fromAddress: contact?.address || undefined,
    fromName: contact?.name ?? '',
    subject: mail.subject,
    text: mail.text ?? '',
    html: typeof mail.html === 'string' ? mail.html : undefined,
    attachments: (mail.attachments ?? []).map((a) => ({
      content: a.content,
      contentType: a.contentType,
      ...(a.filename ? { filename: a.filename } : {}),
      ...(a.cid ? { cid: a.cid } : {}),
      contentDisposition: a.contentDisposition === 'inline' ? 'inline' : 'attachment',
    })),
    thread: [mail.references ?? [], mail.inReplyTo ?? []].flat().join(' '),
    authentication: m.authentication,
    note: undefined,
  };
}

/** A message as stored, with the reply kept for the agent when it is one. */
function toStored(m: ReceivedMessage, delivery: DeliveryFacts): InboundMessage {
  const base = { recipient: m.recipient, messageId: m.messageId, deliveryId: m.deliveryId, kind: m.what.kind };
  if (m.what.kind !== 'reply') return { ...base, reply: undefined };
  const sender = m.mail.from?.value?.[0];
  return {
    ...base,
    reply: {
      delivery_id: delivery.id,
      user_id: delivery.user_id,
      message_kind: delivery.message_kind,
      message_id: delivery.message_id,
      contact_id: delivery.contact_id,
      from_address: (sender?.address || delivery.address).slice(0, 998),
      from_name: sender?.name ? sender.name.slice(0, 998) : null,
      subject: (m.mail.subject ?? '').replaceAll('\u0000', '').slice(0, 998),
      text: (m.mail.text ?? '').replaceAll('\u0000', '').slice(0, 1_000_000),
      auto_reply: m.what.autoReply,
      authentication: m.authentication ? JSON.stringify(m.authentication) : null,
      // Mail whose DMARC fails is not what it says it is: kept for the record, never forwarded.
      held_reason: dmarcFails(m) ? 'dmarc_fail' : null,
    },
  };
}

/** A reply whose From domain's DMARC check failed: someone else's mail dressed as the contact's. */
function dmarcFails(m: ReceivedMessage): boolean {
  return m.authentication?.dmarc === 'fail';
}

/** The delivery event a message is, if any: a person's reply, a mailed unsubscribe, a complaint, a bounce with a status. */
function eventsOf(m: ReceivedMessage, now: Date): DeliveryEvent[] {
  const base = { deliveryId: m.deliveryId, occurredAt: now };
  const what = m.what;
  if (!m.honoured && (what.kind === 'bounce' || what.kind === 'complaint')) return [];
  switch (what.kind) {
    case 'reply':
      // A forged reply (DMARC fails) is no answer from the contact: not counted either.
      return what.autoReply || dmarcFails(m) ? [] : [{ ...base, source: TRACKING_SOURCE, eventId: `reply:${m.deliveryId}`, type: 'reply' }];
    case 'unsubscribe':
      // The mailed unsubscribe shares the link's event id: a contact who does both counts once.
      return [{ ...base, source: TRACKING_SOURCE, eventId: `unsubscribe:${m.deliveryId}`, type: 'unsubscribe', detail: 'by mail' }];
    case 'complaint':
      if (what.effect === 'none') return [];
      if (what.effect === 'unsubscribe') {
        return [{ ...base, source: TRACKING_SOURCE, eventId: `unsubscribe:${m.deliveryId}`, type: 'unsubscribe', detail: what.detail }];
      }
      return [{ ...base, source: INBOUND_SOURCE, eventId: `spamreport:${m.deliveryId}`, type: 'spamreport', detail: what.detail }];
    case 'bounce': {
      const report = what.report;
      // A delay notice counts as a soft bounce while the server still tries; a failure ends the delivery.
      const type = report.delayed ? 'temporary_bounce' : report.hard ? 'hard_bounce' : 'soft_bounce';
      const code = report.status ?? report.replyCode;
      const detail = [code, report.diagnostic].filter(Boolean).join(' ').slice(0, 1000) || report.classification;
      return [
        {
          ...base,
          source: INBOUND_SOURCE,
          eventId: `${type}:${m.deliveryId}`,
          type,
          detail,
          outcome: {
            classification: report.classification,
            permanent: report.hard,
            code,
            description: report.diagnostic || null,
          },
        },
      ];
    }
  }
}
