import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';
import type { Config, InboundConfig } from '../config.ts';
import type { Db } from '../db/database.ts';
import { mailFromAddress, type SenderIdentity, senderIdentity } from '../email/sender.ts';
import type { TrackingTokens } from '../email/tokens.ts';
import { TRACKING_SOURCE } from '../email/tracking.ts';
import type { MailTransport } from '../email/transport.ts';
import { type DeliveryEvent, recordDeliveryEvents } from '../sending/delivery-events.ts';
import type { Clock } from '../time.ts';
import { classify, type InboundKind } from './classify.ts';

/**
 * The inbound mail receiver (on when INBOUND_DOMAIN is set; runs in worker processes, several of
 * them may listen behind one MX). Outgoing email carries three signed per-delivery addresses at
 * INBOUND_DOMAIN: `r-TOKEN` (Reply-To), `b-TOKEN` (the envelope sender, VERP) and `u-TOKEN` (the
 * List-Unsubscribe mailto). Anything else but postmaster is refused at RCPT with 550, a message
 * over INBOUND_MAX_BYTES with 552.
 *
 * Each message is recorded once per recipient address and Message-ID (`inbound_messages`), and
 * its outcome goes through `recordDeliveryEvents` like every other channel's: a reply counts
 * once per delivery, a bounce or complaint once per delivery. A reply is forwarded to the sender
 * before the SMTP exchange ends; if the relay refuses it, the sending MTA is told to try again
 * (451) and the retry forwards it without counting it again.
 */
export const INBOUND_SOURCE = 'inbound';

type Purpose = 'reply' | 'bounce' | 'unsubscribe';
const PREFIX: Record<string, Purpose> = { r: 'reply', b: 'bounce', u: 'unsubscribe' };
const TOKEN_ADDRESS = /^([rbu])-([0-9a-f]{52})$/;

export interface InboundReceiver {
  readonly port: number;
  stop(): Promise<void>;
}

export interface InboundDeps {
  db: Db;
  config: Config;
  tokens: TrackingTokens;
  transport: MailTransport;
  clock: Clock;
  log: FastifyBaseLogger;
  tls: { key: string; cert: string } | undefined;
}

interface Target {
  purpose: Purpose | 'postmaster';
  deliveryId: number | undefined;
}

/** What a recipient address names: a signed token of ours, postmaster, or nothing (undefined). */
export function readRecipient(address: string, inbound: InboundConfig, tokens: TrackingTokens): Target | undefined {
  const at = address.lastIndexOf('@');
  if (at < 0 || address.slice(at + 1).toLowerCase() !== inbound.domain) return undefined;
  const local = address.slice(0, at).toLowerCase();
  if (local === 'postmaster' || local === 'abuse') return { purpose: 'postmaster', deliveryId: undefined };
  const match = TOKEN_ADDRESS.exec(local);
  if (!match) return undefined;
  const purpose = PREFIX[match[1] as string] as Purpose;
  const claim = tokens.verifyFromAddress(purpose, match[2] as string);
  return claim ? { purpose, deliveryId: claim.deliveryId } : undefined;
}

export async function startInboundReceiver(deps: InboundDeps): Promise<InboundReceiver> {
  const inbound = deps.config.inbound;
  if (!inbound) throw new Error('INBOUND_DOMAIN is not set');
  const handler = new InboundHandler(deps, inbound);
  const server = new SMTPServer({
    name: inbound.domain,
    banner: 'Hopper inbound',
    size: inbound.maxBytes,
    rejectOversized: true,
    authOptional: true,
    disabledCommands: deps.tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...(deps.tls ? { key: deps.tls.key, cert: deps.tls.cert } : {}),
    logger: false,
    maxClients: 2000,
    socketTimeout: 60_000,
    onRcptTo(address, _session, callback) {
      if (readRecipient(address.address, inbound, deps.tokens)) return callback();
      callback(Object.assign(new Error('5.1.1 No such recipient here'), { responseCode: 550 }));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (error) => callback(error));
      stream.on('end', () => {
        if (stream.sizeExceeded) {
          return callback(Object.assign(new Error('5.3.4 Message too big'), { responseCode: 552 }));
        }
        handler.accept(Buffer.concat(chunks), session.envelope.rcptTo).then(
          () => callback(),
          (error: Error & { responseCode?: number }) => {
            deps.log.warn({ err: error }, 'inbound message not taken: the sender will retry');
            callback(Object.assign(new Error('4.3.0 Try again later'), { responseCode: error.responseCode ?? 451 }));
          },
        );
      });
    },
  });
  server.on('error', (error) => deps.log.warn({ err: error }, 'inbound SMTP connection error'));
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    // reusePort: several worker processes of one host listen on the same port behind the MX, and
    // the kernel spreads the connections among them.
    server.listen({ port: inbound.port, host: inbound.host, reusePort: true }, () => {
      server.server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.server.address() as AddressInfo;
  deps.log.info({ port, domain: inbound.domain }, 'inbound mail receiver listening');
  return {
    port,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Messages recorded in one transaction at most, and batches being recorded at once. */
const MAX_BATCH = 200;
const MAX_BATCHES_IN_FLIGHT = 2;

type DeliveryFacts = { id: number; user_id: number; message_kind: string; message_id: number; contact_id: number; address: string };

/** One inbound message for one of our addresses, read and classified, waiting to be recorded. */
interface Item {
  recipient: string;
  messageId: string;
  deliveryId: number;
  mail: ParsedMail;
  what: InboundKind | { kind: 'unsubscribe' };
  done: (error?: unknown) => void;
}

/**
 * Records what arrives in batches: the messages whose SMTP exchanges end close together are
 * stored in one transaction and their delivery events in one `recordDeliveryEvents` call, so a
 * burst of replies and bounces costs a few statements per batch rather than per message. At most
 * MAX_BATCHES_IN_FLIGHT batches are being recorded at once; what arrives meanwhile waits for the
 * next batch (a group commit: the busier the receiver, the larger its batches).
 */
class InboundHandler {
  readonly #deps: InboundDeps;
  readonly #inbound: InboundConfig;
  #pending: Item[] = [];
  #scheduled = false;
  #inFlight = 0;

  constructor(deps: InboundDeps, inbound: InboundConfig) {
    this.#deps = deps;
    this.#inbound = inbound;
  }

  async accept(raw: Buffer, recipients: SMTPServerAddress[]): Promise<void> {
    const mail = await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true });
    const messageId = (mail.messageId ?? `<sha256-${createHash('sha256').update(raw).digest('hex')}>`).slice(0, 998);
    const waits: Promise<void>[] = [];
    for (const recipient of recipients) {
      const target = readRecipient(recipient.address, this.#inbound, this.#deps.tokens);
      if (!target) continue;
      const deliveryId = target.deliveryId ?? this.#embeddedDelivery(mail, raw);
      if (deliveryId === undefined) continue; // postmaster mail about nothing of ours
      const what = target.purpose === 'unsubscribe' ? ({ kind: 'unsubscribe' } as const) : classify(mail);
      waits.push(
        new Promise<void>((resolve, reject) => {
          this.#pending.push({
            recipient: recipient.address.toLowerCase(),
            messageId,
            deliveryId,
            mail,
            what,
            done: (error) => (error ? reject(error) : resolve()),
          });
        }),
      );
    }
    if (waits.length > 0) this.#kick();
    await Promise.all(waits);
  }

  /** The delivery a report to postmaster is about: a signed address of ours in the returned message. */
  #embeddedDelivery(mail: ParsedMail, raw: Buffer): number | undefined {
    const text = [raw.toString('utf8'), ...(mail.attachments ?? []).map((a) => a.content.toString('utf8'))].join('\n');
    const domain = this.#inbound.domain.replace(/\./g, '\\.');
    for (const match of text.matchAll(new RegExp(`\\b([rbu])-([0-9a-f]{52})@${domain}`, 'gi'))) {
      const claim = this.#deps.tokens.verifyFromAddress(
        PREFIX[(match[1] as string).toLowerCase()] as Purpose,
        (match[2] as string).toLowerCase(),
      );
      if (claim) return claim.deliveryId;
    }
    return undefined;
  }

  /** Starts a batch soon, unless one is due already or enough are being recorded. */
  #kick(): void {
    if (this.#scheduled || this.#inFlight >= MAX_BATCHES_IN_FLIGHT || this.#pending.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => this.#flush());
  }

  #flush(): void {
    this.#scheduled = false;
    const batch = this.#pending.splice(0, MAX_BATCH);
    if (batch.length === 0) return;
    this.#inFlight++;
    this.#record(batch)
      .then(
        (failures) => {
          // A reply whose forward the relay refused is answered 451: the sending MTA retries it.
          for (const item of batch) item.done(failures.get(item));
        },
        (error: unknown) => {
          for (const item of batch) item.done(error);
        },
      )
      .finally(() => {
        this.#inFlight--;
        this.#kick();
      });
    this.#kick();
  }

  /** Stores a batch once per recipient and Message-ID, records its delivery events, forwards its replies; the forwards that failed. */
  async #record(batch: Item[]): Promise<Map<Item, unknown>> {
    const { db, clock } = this.#deps;
    const now = clock();
    const ids = [...new Set(batch.map((i) => i.deliveryId))];
    const found = await db
      .selectFrom('deliveries')
      .select(['id', 'user_id', 'message_kind', 'message_id', 'contact_id', 'address'])
      .where('id', 'in', ids)
      .execute();
    const deliveries = new Map(found.map((d) => [d.id, d as DeliveryFacts]));
    // The same message twice in one batch (or to two of our addresses) is one item per key.
    const unique = new Map<string, Item>();
    for (const item of batch) if (deliveries.has(item.deliveryId)) unique.set(`${item.recipient}\u0000${item.messageId}`, item);
    const items = [...unique.values()];
    if (items.length === 0) return new Map<Item, unknown>();

    const kindOf = (item: Item) => (item.what.kind === 'reply' ? 'reply' : item.what.kind);
    const toForward = await db.transaction().execute(async (trx) => {
      const inserted = await trx
        .insertInto('inbound_messages')
        .values(
          items.map((i) => ({
            recipient: i.recipient,
            message_id: i.messageId,
            delivery_id: i.deliveryId,
            kind: kindOf(i),
            received_at: now,
          })),
        )
        .onConflict((oc) => oc.columns(['recipient', 'message_id']).doNothing())
        .returning(['id', 'recipient', 'message_id'])
        .execute();
      const fresh = new Map(inserted.map((r) => [`${r.recipient}\u0000${r.message_id}`, r.id]));
      const newReplies = items.flatMap((item) => {
        const inboundId = fresh.get(`${item.recipient}\u0000${item.messageId}`);
        if (inboundId === undefined || item.what.kind !== 'reply') return [];
        const delivery = deliveries.get(item.deliveryId) as DeliveryFacts;
        const sender = item.mail.from?.value?.[0];
        return [
          {
            inbound_id: inboundId,
            delivery_id: delivery.id,
            user_id: delivery.user_id,
            message_kind: delivery.message_kind,
            message_id: delivery.message_id,
            contact_id: delivery.contact_id,
            from_address: (sender?.address || delivery.address).slice(0, 998),
            from_name: sender?.name ? sender.name.slice(0, 998) : null,
            subject: (item.mail.subject ?? '').replaceAll('\u0000', '').slice(0, 998),
            text: (item.mail.text ?? '').replaceAll('\u0000', '').slice(0, 1_000_000),
            auto_reply: item.what.autoReply,
            received_at: now,
          },
        ];
      });
      const stored =
        newReplies.length > 0 ? await trx.insertInto('replies').values(newReplies).returning(['id', 'inbound_id']).execute() : [];
      // Replies seen before whose forward did not go out yet (the relay refused it last time).
      const again = items.filter((i) => i.what.kind === 'reply' && !i.what.autoReply && !fresh.has(`${i.recipient}\u0000${i.messageId}`));
      const unsent =
        again.length > 0
          ? await trx
              .selectFrom('replies as r')
              .innerJoin('inbound_messages as m', 'm.id', 'r.inbound_id')
              .select(['r.id', 'm.recipient', 'm.message_id'])
              .where('r.forwarded_at', 'is', null)
              .where('r.auto_reply', '=', false)
              .where(
                'm.id',
                'in',
                trx
                  .selectFrom('inbound_messages')
                  .select('id')
                  .where((eb) => eb.or(again.map((i) => eb.and([eb('recipient', '=', i.recipient), eb('message_id', '=', i.messageId)])))),
              )
              .execute()
          : [];
      const byInbound = new Map(stored.map((r) => [r.inbound_id, r.id]));
      const forward = new Map<Item, number>();
      for (const item of items) {
        if (item.what.kind !== 'reply' || item.what.autoReply) continue;
        const inboundId = fresh.get(`${item.recipient}\u0000${item.messageId}`);
        const replyId =
          inboundId !== undefined
            ? byInbound.get(inboundId)
            : unsent.find((u) => u.recipient === item.recipient && u.message_id === item.messageId)?.id;
        if (replyId !== undefined) forward.set(item, replyId);
      }
      return forward;
    });

    // Every outcome through the one recorder; event ids make each count once per delivery,
    // whatever was stored before (a crash between the two statements loses nothing).
    const events: DeliveryEvent[] = [];
    for (const item of items) {
      const base = { deliveryId: item.deliveryId, occurredAt: now };
      const what = item.what;
      if (what.kind === 'reply') {
        if (!what.autoReply) events.push({ ...base, source: TRACKING_SOURCE, eventId: `reply:${item.deliveryId}`, type: 'reply' });
      } else if (what.kind === 'unsubscribe') {
        // The mailed unsubscribe shares the link's event id: a contact who does both counts once.
        events.push({
          ...base,
          source: TRACKING_SOURCE,
          eventId: `unsubscribe:${item.deliveryId}`,
          type: 'unsubscribe',
          detail: 'by mail',
        });
      } else if (what.kind === 'complaint') {
        events.push({ ...base, source: INBOUND_SOURCE, eventId: `spamreport:${item.deliveryId}`, type: 'spamreport', detail: what.detail });
      } else if (what.status !== '') {
        const type = what.permanent ? 'hard_bounce' : 'temporary_bounce';
        events.push({ ...base, source: INBOUND_SOURCE, eventId: `${type}:${item.deliveryId}`, type, detail: what.detail });
      }
    }
    await recordDeliveryEvents(db, events, now);

    // Forwards of the batch side by side, then one statement marks those that went out.
    const owners = new Map<number, Promise<SenderIdentity>>();
    const entries = [...toForward];
    const results = await Promise.allSettled(
      entries.map(([item, replyId]) => this.#forward(replyId, deliveries.get(item.deliveryId) as DeliveryFacts, item.mail, owners)),
    );
    const sent = entries.filter((_, i) => results[i]?.status === 'fulfilled').map(([, replyId]) => replyId);
    if (sent.length > 0) await db.updateTable('replies').set({ forwarded_at: clock() }).where('id', 'in', sent).execute();
    const failures = new Map<Item, unknown>();
    entries.forEach(([item], i) => {
      const result = results[i];
      if (result?.status === 'rejected') failures.set(item, result.reason);
    });
    return failures;
  }

  /** The contact's answer to the agent's own mailbox, through the relay, with the contact as Reply-To. */
  async #forward(replyId: number, delivery: DeliveryFacts, mail: ParsedMail, owners: Map<number, Promise<SenderIdentity>>): Promise<void> {
    const { db, config, transport } = this.#deps;
    let identity = owners.get(delivery.user_id);
    if (!identity) {
      identity = db
        .selectFrom('users')
        .select(['first_name', 'last_name', 'email', 'sender_name', 'sender_email', 'postal_address'])
        .where('id', '=', delivery.user_id)
        .executeTakeFirstOrThrow()
        .then((owner) => senderIdentity(owner, config));
      owners.set(delivery.user_id, identity);
    }
    const sender = await identity;
    const contact = mail.from?.value?.[0];
    const contactAddress = contact?.address || delivery.address;
    const contactName = contact?.name || contactAddress;
    const host = new URL(config.publicUrl).hostname;
    await transport.forward(
      {
        messageId: `<reply-${replyId}@${host}>`,
        from: { name: `${contactName} via Hopper`, address: sender.from.address },
        replyTo: { name: contact?.name ?? '', address: contactAddress },
        envelope: { from: mailFromAddress(config.mailFrom) },
        to: sender.own.address,
        subject: mail.subject ?? '(no subject)',
        text: mail.text ?? '',
        html: typeof mail.html === 'string' ? mail.html : `<pre>${escapeHtml(mail.text ?? '')}</pre>`,
      },
      `reply-${replyId}`,
    );
  }
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
