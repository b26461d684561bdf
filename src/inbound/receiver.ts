import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';
import type { Config, InboundConfig } from '../config.ts';
import type { Db } from '../db/database.ts';
import { GroupCommit } from '../db/group-commit.ts';
import type { TrackingTokens } from '../email/tokens.ts';
import type { MailTransport } from '../email/transport.ts';
import type { Clock } from '../time.ts';
import { type Arrival, authenticateArrival, type DNSResolver, dnsResolver, feedbackLoopOf } from './authentication.ts';
import { classify, type InboundKind } from './classify.ts';
import { type Meaning, type ReceivedMessage, recordReceived } from './inbound-messages.ts';

/**
 * The inbound mail receiver (on when INBOUND_DOMAIN is set; runs in worker processes, several of
 * them may listen behind one MX). Outgoing email carries three signed per-delivery addresses at
 * INBOUND_DOMAIN: `r-TOKEN` (Reply-To), `b-TOKEN` (the envelope sender, VERP) and `u-TOKEN` (the
 * List-Unsubscribe mailto). Anything else but postmaster is refused at RCPT with 550, a message
 * over INBOUND_MAX_BYTES with 552. What a message means is recorded by inbound-messages.ts, for
 * the messages whose SMTP exchanges end close together in one batch.
 */

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
  /** How the SPF, DKIM and DMARC checks ask the DNS (tests give their own); DNS_SERVERS or the system's when absent. */
  resolver?: DNSResolver | undefined;
}

interface Target {
  purpose: Purpose | 'postmaster';
  deliveryId: number | undefined;
}

/** What a recipient address names: a signed token of ours, postmaster, or nothing (undefined). */
export function readRecipient(address: string, inbound: InboundConfig, tokens: TrackingTokens): Target | undefined {
  const at = address.lastIndexOf('@');
  // RFC 5321 4.1.1.3: `RCPT TO:<postmaster>`, without a domain, must be accepted.
  if (at < 0 && address.toLowerCase() === 'postmaster') return { purpose: 'postmaster', deliveryId: undefined };
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
        const arrival = {
          // An IPv4 client of a dual-stack socket is shown as ::ffff:a.b.c.d; SPF's ip4 needs a.b.c.d.
          ip: session.remoteAddress.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, ''),
          helo: session.hostNameAppearsAs,
          sender: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        };
        handler.accept(Buffer.concat(chunks), session.envelope.rcptTo, arrival).then(
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

/**
 * What a message means by the address it came to. Nothing that arrives at a bounce (`b-`) or
 * postmaster address is a person's reply to the agent: what is neither a bounce nor a complaint
 * there is kept like an automatic reply (listed, not counted, not forwarded). At a reply (`r-`)
 * address a bounce or a complaint is what it is, never a reply (whether it counts is decided by
 * who sent it, in `accept`). A feedback report of type `opt-out` unsubscribes; one of type
 * `auth-failure` is about the sender's authentication and leaves the contact as it is.
 */
export function meaningOf(purpose: Purpose | 'postmaster', kind: InboundKind): Meaning | undefined {
  switch (kind.kind) {
    case 'delivered':
      return undefined;
    case 'bounce':
      return { kind: 'bounce', report: kind.report };
    case 'complaint': {
      const effect = kind.feedbackType === 'opt-out' ? 'unsubscribe' : kind.feedbackType === 'auth-failure' ? 'none' : 'spamreport';
      return { kind: 'complaint', detail: kind.detail, effect };
    }
    case 'reply':
      return { kind: 'reply', autoReply: kind.autoReply || purpose !== 'reply' };
  }
}

/** A delivery report (a bounce) or a feedback report (a complaint, an ARF opt-out): what retires a contact. */
function isReport(what: Meaning): boolean {
  return what.kind === 'bounce' || what.kind === 'complaint';
}

/**
 * Messages recorded in one batch at most, and batches being recorded at once: the messages whose
 * SMTP exchanges end close together are recorded together (db/group-commit.ts), so a burst of
 * replies and bounces costs a few statements per batch rather than per message; what arrives
 * while MAX_BATCHES_IN_FLIGHT batches are being recorded waits for the next one.
 */
const MAX_BATCH = 200;
const MAX_BATCHES_IN_FLIGHT = 2;

/** Reads what arrives and hands it to the group commit; each exchange waits for its messages to be recorded. */
class InboundHandler {
  readonly #deps: InboundDeps;
  readonly #inbound: InboundConfig;
  readonly #received: GroupCommit<ReceivedMessage>;
  readonly #resolver: DNSResolver | undefined;

  constructor(deps: InboundDeps, inbound: InboundConfig) {
    this.#deps = deps;
    this.#inbound = inbound;
    this.#resolver = deps.resolver ?? dnsResolver(deps.config.dnsServers);
    this.#received = new GroupCommit<ReceivedMessage>({
      maxBatch: MAX_BATCH,
      maxInFlight: MAX_BATCHES_IN_FLIGHT,
      delay: 'tick',
      // A reply whose forward the relay refused fails its message alone: the exchange is answered 451, and the sending MTA retries it.
      write: (batch) => recordReceived(deps, batch),
    });
  }

  async accept(raw: Buffer, recipients: SMTPServerAddress[], arrival: Arrival): Promise<void> {
    const mail = await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true });
    const messageId = (mail.messageId ?? `<sha256-${createHash('sha256').update(raw).digest('hex')}>`).slice(0, 998);
    const received: (Omit<ReceivedMessage, 'authentication' | 'honoured'> & { confirmed: boolean })[] = [];
    for (const recipient of recipients) {
      const target = readRecipient(recipient.address, this.#inbound, this.#deps.tokens);
      if (!target) continue;
      const deliveryId = target.deliveryId ?? this.#embeddedDelivery(mail, raw);
      if (deliveryId === undefined) continue; // postmaster mail about nothing of ours
      const what =
        target.purpose === 'unsubscribe'
          ? ({ kind: 'unsubscribe' } as const)
          : meaningOf(target.purpose, classify(mail, { raw, nullSender: arrival.sender === '' }));
      if (!what) continue; // a success notice: nothing to record
      // A bounce or a complaint from the null sender at the bounce (VERP) address is what a
      // receiving server sends there; anywhere else (a reply address, postmaster, or from a
      // sender) anyone can write one, and it counts only from a known feedback loop.
      const confirmed = !isReport(what) || (target.purpose === 'bounce' && arrival.sender === '');
      received.push({ recipient: recipient.address.toLowerCase(), messageId, deliveryId, mail, what, confirmed });
    }
    // Who a person's reply really comes from decides whether it may reach the agent, and who a
    // report comes from whether it counts: checked once per message, before it is recorded (a
    // DNS failure is a temperror, not a refusal).
    const verdict = received.some((m) => (m.what.kind === 'reply' && !m.what.autoReply) || !m.confirmed)
      ? await authenticateArrival(raw, arrival, this.#inbound.domain, this.#resolver)
      : undefined;
    const from = (mail.from?.value ?? []).map((a) => a.address ?? '');
    const loop = verdict && received.some((m) => !m.confirmed) ? feedbackLoopOf(from, verdict, this.#inbound.feedbackLoops) : undefined;
    for (const m of received) {
      if (!m.confirmed && !loop) {
        this.#deps.log.info(
          { recipient: m.recipient, kind: m.what.kind, sender: arrival.sender },
          'a report neither from the null sender at a bounce address nor from a known feedback loop: kept, not counted',
        );
      }
    }
    await Promise.all(
      received.map(({ confirmed, ...m }) => this.#received.add({ ...m, authentication: verdict?.stored, honoured: confirmed || !!loop })),
    );
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
}
