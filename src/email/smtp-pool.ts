import { PassThrough } from 'node:stream';
import { type ConnectionUrlOptions, parseConnectionUrl } from 'nodemailer/lib/shared';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { realTimeMs } from '../time.ts';

/**
 * A pool of SMTP connections that sends ready-made RFC 5322 text. The SMTP conversation (TLS,
 * STARTTLS, AUTH, dot-stuffing) is nodemailer's SMTPConnection; only the pooling is ours. Handing a
 * composed message straight to a connection costs about 45 µs of CPU, against 150 µs through
 * nodemailer's pooled transport with a raw message and 400 µs with message options (bench/send.ts).
 *
 * Connections open on demand up to `maxConnections` and stay open. A connection whose send failed
 * for the message's own sake (an envelope or data refusal other than 421) is reset and reused;
 * after any other failure it is closed, and the next send opens a fresh one. A connection the
 * server closes while idle leaves the pool when it ends.
 */
interface SmtpPoolOptions {
  url: string;
  /** The name this side gives in EHLO: the public host name (PUBLIC_URL's), never the machine's. */
  name: string;
  maxConnections: number;
  /** Messages per second over the whole pool; 0 for no limit. */
  rateLimit: number;
  connectionTimeout: number;
  greetingTimeout: number;
  socketTimeout: number;
}

interface Envelope {
  from: string;
  to: string[];
}

type Connection = InstanceType<typeof SMTPConnection>;

export class SmtpPool {
  readonly #options: SmtpPoolOptions;
  readonly #connectionOptions: ConnectionUrlOptions;
  readonly #idle: Connection[] = [];
  readonly #open = new Set<Connection>();
  readonly #waiting: ((connection: Connection | Error) => void)[] = [];
  #opening = 0;
  #closed = false;
  #windowStart = 0;
  #windowCount = 0;

  constructor(options: SmtpPoolOptions) {
    this.#options = options;
    this.#connectionOptions = parseConnectionUrl(options.url);
  }

  /**
   * Sends one message. With `gate`, the envelope and the whole text go out at once but the final
   * dot (the moment the server accepts, and the message can no longer be taken back) waits until
   * the gate resolves: the exchange overlaps whatever the gate waits for.
   */
  async send(envelope: Envelope, raw: string | Buffer, gate?: () => Promise<void>): Promise<void> {
    await this.#rateLimit();
    const connection = await this.#acquire();
    try {
      let message: string | Buffer | PassThrough = raw;
      if (gate) {
        const staged = new PassThrough();
        staged.write(raw);
        gate().then(
          () => staged.end(),
          (error: Error) => staged.destroy(error),
        );
        message = staged;
      }
      if (hasUtf8Headers(raw)) declareSmtpUtf8(connection);
      await new Promise<void>((resolve, reject) => connection.send(envelope, message, (error) => (error ? reject(error) : resolve())));
      this.#release(connection);
    } catch (error) {
      const { code, responseCode } = error as { code?: string; responseCode?: number };
      if ((code === 'EENVELOPE' || code === 'EMESSAGE') && responseCode !== 421) {
        connection.reset((resetError) => (resetError ? this.#discard(connection) : this.#release(connection)));
      } else {
        this.#discard(connection);
      }
      throw error;
    }
  }

  close(): void {
    this.#closed = true;
    for (const connection of this.#open) connection.quit();
    this.#open.clear();
    this.#idle.length = 0;
    for (const waiter of this.#waiting.splice(0)) waiter(new Error('the SMTP pool is closed'));
  }

  async #acquire(): Promise<Connection> {
    if (this.#closed) throw new Error('the SMTP pool is closed');
    const idle = this.#idle.pop();
    if (idle) return idle;
    if (this.#open.size + this.#opening < this.#options.maxConnections) return this.#connect();
    const handed = await new Promise<Connection | Error>((resolve) => this.#waiting.push(resolve));
    if (handed instanceof Error) throw handed;
    return handed;
  }

  #release(connection: Connection): void {
    if (!this.#open.has(connection)) return;
    const waiter = this.#waiting.shift();
    if (waiter) waiter(connection);
    else this.#idle.push(connection);
  }

  #discard(connection: Connection): void {
    this.#forget(connection);
    connection.close();
  }

  /** A connection gone from the pool makes room: a waiting send opens a new one. */
  #forget(connection: Connection): void {
    if (!this.#open.delete(connection)) return;
    const at = this.#idle.indexOf(connection);
    if (at >= 0) this.#idle.splice(at, 1);
    const waiter = this.#waiting.shift();
    if (waiter) this.#connect().then(waiter, waiter);
  }

  async #connect(): Promise<Connection> {
    const { auth, ...options } = this.#connectionOptions;
    const connection = new SMTPConnection({
      ...options,
      name: this.#options.name,
      connectionTimeout: this.#options.connectionTimeout,
      greetingTimeout: this.#options.greetingTimeout,
      socketTimeout: this.#options.socketTimeout,
    });
    this.#opening++;
    let failed: (error: Error) => void = () => {};
    const onError = (error: Error) => failed(error);
    const onEnd = () => failed(Object.assign(new Error('the SMTP server closed the connection'), { code: 'ECONNECTION' }));
    connection.on('error', onError);
    connection.once('end', onEnd);
    try {
      await new Promise<void>((resolve, reject) => {
        failed = reject;
        connection.connect(() => resolve());
      });
      if (auth && connection.allowsAuth) {
        await new Promise<void>((resolve, reject) => {
          failed = reject;
          connection.login(auth, (error) => (error ? reject(error) : resolve()));
        });
      }
    } catch (error) {
      connection.close();
      throw error;
    } finally {
      this.#opening--;
      connection.off('error', onError);
      connection.off('end', onEnd);
    }
    // Errors reach the send under way through its callback; an idle connection just leaves.
    connection.on('error', () => {});
    connection.once('end', () => this.#forget(connection));
    if (this.#closed) {
      connection.quit();
      throw new Error('the SMTP pool is closed');
    }
    this.#open.add(connection);
    return connection;
  }

  /** At most `rateLimit` sends start in any one-second window. */
  async #rateLimit(): Promise<void> {
    const limit = this.#options.rateLimit;
    if (limit <= 0) return;
    for (;;) {
      const now = realTimeMs();
      if (now - this.#windowStart >= 1000) {
        this.#windowStart = now;
        this.#windowCount = 0;
      }
      if (this.#windowCount < limit) {
        this.#windowCount++;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, this.#windowStart + 1000 - now));
    }
  }
}

/** Whether the header section holds raw UTF-8 (RFC 6532: an address such as josé@correo.example in Reply-To). */
function hasUtf8Headers(raw: string | Buffer): boolean {
  const text = typeof raw === 'string' ? raw : raw.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  // Anything but printable ASCII and white space: in a header section, a byte outside ASCII.
  return /[^ -~\s]/.test(end < 0 ? text : text.slice(0, end));
}

/**
 * A message with UTF-8 headers needs SMTPUTF8 on its MAIL FROM (RFC 6531), which nodemailer adds
 * only for a non-ASCII envelope address: when the server offers it, the next MAIL FROM of this
 * connection carries it. A server without SMTPUTF8 gets the message as it is (8-bit headers, which
 * most relays pass on).
 */
function declareSmtpUtf8(connection: Connection): void {
  const internals = connection as unknown as {
    _supportedExtensions?: string[];
    _sendCommand: (command: string, ...rest: unknown[]) => void;
  };
  if (!internals._supportedExtensions?.includes('SMTPUTF8') || typeof internals._sendCommand !== 'function') return;
  const original = internals._sendCommand;
  internals._sendCommand = function (this: unknown, command: string, ...rest: unknown[]) {
    if (!/^MAIL FROM:/i.test(command)) return original.call(this, command, ...rest);
    internals._sendCommand = original;
    return original.call(this, / SMTPUTF8\b/i.test(command) ? command : `${command} SMTPUTF8`, ...rest);
  };
}
