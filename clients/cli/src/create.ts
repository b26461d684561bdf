import { readFile } from 'node:fs/promises';
import type { Hopper } from '../../typescript/src/index.ts';
import { unwrap } from '../../typescript/src/index.ts';
import type { KINDS } from './messages.ts';
import { CliError, type Io } from './output.ts';

/**
 * `hopper drops create`, `hopper emails create`, `hopper watch` and `hopper suppressions lift`:
 * what an assistant needs to send a message and follow it without writing JSON by hand.
 */

type Kind = (typeof KINDS)[keyof typeof KINDS];

export interface RecipientOptions {
  tag: string[];
  tagId: number[];
  contact: number[];
}

export interface When {
  /** Schedule it to go now. */
  send?: boolean;
  /** Schedule it for this time (ISO 8601). */
  at?: string;
}

type RecipientEntry = { group: 'Tags' | 'Contacts'; value: number };

/** The recipients named by tag name, tag id or contact id; a tag name must name one of the user's tags. */
export async function recipientsOf(hopper: Hopper, userId: number, options: RecipientOptions): Promise<RecipientEntry[]> {
  const entries: RecipientEntry[] = [];
  for (const name of options.tag) {
    const found = await unwrap(
      hopper.api.GET('/v3/users/{user_id}/tags', { params: { path: { user_id: userId }, query: { name: [name], per_page: 100 } } }),
    );
    const tag = found.data.find((candidate) => candidate.name.toLowerCase() === name.toLowerCase());
    if (!tag) {
      const near = found.data.map((candidate) => candidate.name);
      throw new CliError(`User ${userId} has no tag named "${name}"${near.length > 0 ? ` (tags containing it: ${near.join(', ')})` : ''}.`);
    }
    entries.push({ group: 'Tags', value: tag.id });
  }
  for (const id of options.tagId) entries.push({ group: 'Tags', value: id });
  for (const id of options.contact) entries.push({ group: 'Contacts', value: id });
  if (entries.length === 0) throw new CliError('Name who receives it: --tag NAME, --tag-id ID or --contact ID (each repeatable).', 2);
  return entries;
}

function schedule(when: When): { status?: 'Scheduled'; send_type?: 'Now' | 'Future'; send_at?: string } {
  if (when.send && when.at) throw new CliError('Say --send (now) or --at TIME (later), not both.', 2);
  if (when.send) return { status: 'Scheduled', send_type: 'Now' };
  if (when.at) return { status: 'Scheduled', send_type: 'Future', send_at: when.at };
  return {};
}

/** The body text: the option itself, or a file's content (`-` for stdin). */
export async function textOf(io: Io, text: string | undefined, file: string | undefined, what: string): Promise<string> {
  if (text !== undefined && file !== undefined) throw new CliError(`Give the ${what} with --${what} or --${what}-file, not both.`, 2);
  if (file === '-') return readStream(io.stdin);
  if (file !== undefined) {
    try {
      return await readFile(file, 'utf8');
    } catch (error) {
      throw new CliError(`Cannot read ${file}: ${(error as Error).message}`);
    }
  }
  if (text === undefined) throw new CliError(`Give the ${what} with --${what} TEXT or --${what}-file PATH.`, 2);
  return text;
}

async function readStream(stream: NodeJS.ReadableStream | undefined): Promise<string> {
  if (!stream) throw new CliError('There is no standard input to read.', 2);
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

export interface EmailOptions extends When {
  subject: string;
  body: string;
  signature?: number;
  recipients: RecipientEntry[];
}

export async function createEmail(hopper: Hopper, userId: number, options: EmailOptions) {
  return unwrap(
    hopper.api.POST('/v3/users/{user_id}/templated_emails', {
      params: { path: { user_id: userId } },
      body: {
        subject: options.subject,
        body: options.body,
        recipients: options.recipients,
        ...(options.signature !== undefined ? { signature_id: options.signature } : {}),
        ...schedule(options),
      },
    }),
  );
}

export interface DropOptions extends When {
  name: string;
  media: number;
  callbackNumber: string;
  provider: 'Slybroadcast' | 'Sandbox' | 'Drop Cowboy';
  recipients: RecipientEntry[];
}

export async function createDrop(hopper: Hopper, userId: number, options: DropOptions) {
  return unwrap(
    hopper.api.POST('/v3/users/{user_id}/voicemail_drops', {
      params: { path: { user_id: userId } },
      body: {
        name: options.name,
        media_id: options.media,
        callback_number: options.callbackNumber,
        provider: options.provider,
        recipients: options.recipients,
        ...schedule(options),
      },
    }),
  );
}

/** One line on what was made and what comes next. */
export function createdLine(
  kind: Kind,
  message: { id: number; status: string; send_type: string; send_at: string | null },
  command: string,
): string {
  const next =
    message.status === 'Saved'
      ? `a draft; send it with: hopper ${command} send ${message.id}`
      : message.status === 'Scheduled' && message.send_type === 'Future'
        ? `scheduled for ${message.send_at}; follow it with: hopper watch ${command === 'drops' ? 'drop' : 'email'} ${message.id}`
        : `follow it with: hopper watch ${command === 'drops' ? 'drop' : 'email'} ${message.id}`;
  return `${kind.noun} ${message.id} created (${message.status}): ${next}.\n`;
}

const FINAL = new Set(['Sent', 'Failed', 'Cancelled']);
/** The counters shown while watching, in this order; the others appear once they are not zero. */
const WATCHED = ['sent', 'delivered', 'bounce', 'failed'];

export interface WatchOptions {
  intervalMs: number;
  /** Give up after this long (0: never). */
  timeoutMs: number;
  json: boolean;
}

/**
 * Follows a message's status and counters until it is Sent, Failed or Cancelled: a line each time
 * they change (JSON lines with --json). Exit 0 when Sent, 1 when Failed or Cancelled, a draft
 * (Saved) that nothing will send, or the time is up.
 */
export async function watchMessage(io: Io, hopper: Hopper, kind: Kind, id: number, options: WatchOptions): Promise<number> {
  const started = Date.now();
  let last = '';
  for (;;) {
    const message = await kind.get(hopper, id);
    const counters = Object.entries(message.reporting).filter(([name]) => name !== 'date') as [string, number][];
    const deliveries = await kind.deliveriesTotal(hopper, id);
    const shown = counters.filter(([name, count]) => WATCHED.includes(name) || count > 0);
    const line = options.json
      ? JSON.stringify({ id, status: message.status, recipients: deliveries, counters: Object.fromEntries(counters) })
      : `${kind.noun} ${id}: ${message.status}${deliveries > 0 ? `, ${deliveries} deliveries` : ''}; ${shown.map(([name, count]) => `${name} ${count}`).join(', ')}`;
    if (line !== last) {
      io.stdout.write(options.json ? `${line}\n` : `${new Date().toISOString().slice(11, 19)}  ${line}\n`);
      last = line;
    }
    if (FINAL.has(message.status)) return message.status === 'Sent' ? 0 : 1;
    if (message.status === 'Saved') {
      io.stderr.write(
        `hopper: ${kind.noun} ${id} is a draft (Saved): nothing sends it until you do (hopper ${kind.command} send ${id}).\n`,
      );
      return 1;
    }
    if (options.timeoutMs > 0 && Date.now() - started >= options.timeoutMs) {
      io.stderr.write(
        `hopper: ${kind.noun} ${id} is still ${message.status} after ${Math.round(options.timeoutMs / 1000)} s; stopped watching.\n`,
      );
      return 1;
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs));
  }
}

export interface LiftOptions {
  channel: 'email' | 'phone';
  reason: string[];
  since?: string;
  until?: string;
  contact: number[];
  json?: boolean;
}

export async function liftSuppressions(io: Io, hopper: Hopper, userId: number, options: LiftOptions): Promise<void> {
  const result = await unwrap(
    hopper.api.POST('/v3/users/{user_id}/suppressions/lift', {
      params: { path: { user_id: userId } },
      body: {
        channel: options.channel,
        ...(options.reason.length > 0 ? { reasons: options.reason } : {}),
        ...(options.since ? { since: options.since } : {}),
        ...(options.until ? { until: options.until } : {}),
        ...(options.contact.length > 0 ? { contact_ids: options.contact } : {}),
      },
    }),
  );
  if (options.json) {
    io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  const [one, many] = options.channel === 'email' ? ['email address', 'email addresses'] : ['phone number', 'phone numbers'];
  io.stdout.write(
    result.lifted === 0
      ? `No suppressed ${many} matched: nothing lifted.\n`
      : `Lifted ${result.lifted} suppressed ${result.lifted === 1 ? one : many} of user ${userId}: ${result.lifted === 1 ? 'it receives' : 'they receive'} again.\n`,
  );
}
