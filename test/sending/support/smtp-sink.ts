import { once } from 'node:events';
import type { AddressInfo, Socket } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { messageIdOf } from './mime.ts';

/**
 * A real SMTP server on loopback (port 0) that keeps every message it accepts, with its
 * Message-ID. Its behaviour can change while a test runs: reject a recipient, answer MAIL FROM
 * with a temporary error, or take its time over each message.
 */
export interface SinkMessage {
  messageId: string;
  from: string;
  to: string[];
  raw: string;
  /** The name the client gave in EHLO/HELO. */
  helo: string;
  /** Whether MAIL FROM declared SMTPUTF8. */
  smtpUtf8: boolean;
  /** When the sink accepted it (Date.now()). */
  at: number;
}

/** An SMTP reply the sink answers with instead of accepting. */
export interface Refusal {
  code: number;
  message: string;
}

export interface SinkBehaviour {
  /** Answers RCPT TO for an address; undefined accepts it. */
  recipient?: (address: string) => Refusal | undefined;
  /** Answers MAIL FROM; undefined accepts it. Called once per transaction. */
  mailFrom?: () => Refusal | undefined;
  /** Holds each message this long before the final 250 (a slow server). */
  delayMs?: number;
}

export interface SmtpSink {
  readonly url: string;
  readonly messages: SinkMessage[];
  /** MAIL FROM commands refused so far. */
  readonly refusals: number;
  behave(behaviour: SinkBehaviour): void;
  /** How many messages arrived per Message-ID. */
  countsByMessageId(): Map<string, number>;
  /** Messages sent to one address. */
  to(address: string): SinkMessage[];
  /** Closes every open connection from the server's side (as an idle timeout would) and waits until the clients have let go. */
  closeConnections(): Promise<void>;
  close(): Promise<void>;
}

const refuse = (refusal: Refusal) => Object.assign(new Error(refusal.message), { responseCode: refusal.code });

export async function startSmtpSink(initial: SinkBehaviour = {}): Promise<SmtpSink> {
  let behaviour = initial;
  let refusals = 0;
  const messages: SinkMessage[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    maxClients: 200,
    onMailFrom(_address, _session, callback) {
      const refusal = behaviour.mailFrom?.();
      if (refusal) {
        refusals++;
        return callback(refuse(refusal));
      }
      callback();
    },
    onRcptTo(address, _session, callback) {
      const refusal = behaviour.recipient?.(address.address);
      callback(refusal ? refuse(refusal) : undefined);
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const accept = () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          messages.push({
            messageId: messageIdOf(raw),
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            raw,
            helo: session.hostNameAppearsAs,
            smtpUtf8: Boolean(session.envelope.mailFrom && (session.envelope.mailFrom.args as Record<string, unknown>).SMTPUTF8),
            at: Date.now(),
          });
          callback();
        };
        if (behaviour.delayMs) setTimeout(accept, behaviour.delayMs);
        else accept();
      });
    },
  });
  // A client killed mid-conversation resets its connection: expected here, not a failure.
  server.on('error', () => {});
  const sockets = new Set<Socket>();
  server.server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    get refusals() {
      return refusals;
    },
    behave(next) {
      behaviour = next;
    },
    countsByMessageId() {
      const counts = new Map<string, number>();
      for (const m of messages) counts.set(m.messageId, (counts.get(m.messageId) ?? 0) + 1);
      return counts;
    },
    to(address) {
      return messages.filter((m) => m.to.includes(address));
    },
    async closeConnections() {
      const open = [...sockets];
      for (const connection of [...server.connections]) connection.close();
      await Promise.all(open.map((socket) => (socket.closed ? undefined : once(socket, 'close'))));
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
