import type { Delivery, Hopper } from '../../typescript/src/index.ts';
import { unwrap } from '../../typescript/src/index.ts';
import { CliError, type Io, table } from './output.ts';

/**
 * `hopper drops|emails list|show|send|cancel` and `hopper report drop|email ID`. Both kinds share
 * the status lifecycle: send schedules a draft to go now (status Scheduled, send_type Now); cancel
 * turns a Scheduled message back into a draft (Saved) before it starts and stops one that is
 * Sending (Cancelled); a message already Sent, Failed or Cancelled is left as it is.
 */

const getDrop = (hopper: Hopper, id: number) => unwrap(hopper.api.GET('/v3/voicemail_drops/{id}', { params: { path: { id } } }));
const getEmail = (hopper: Hopper, id: number) => unwrap(hopper.api.GET('/v3/templated_emails/{id}', { params: { path: { id } } }));
/** A message as openapi-fetch reads it. */
type Drop = Awaited<ReturnType<typeof getDrop>>;
type Email = Awaited<ReturnType<typeof getEmail>>;
type Message = Drop | Email;
type Status = Message['status'];

interface Kind {
  noun: string;
  /** Its commands' name: `hopper drops …`, `hopper emails …`. */
  command: 'drops' | 'emails';
  list(hopper: Hopper, userId: number, query: ListQuery): AsyncGenerator<Message>;
  get(hopper: Hopper, id: number): Promise<Message>;
  setStatus(hopper: Hopper, id: number, status: 'Scheduled' | 'Saved' | 'Cancelled'): Promise<Message>;
  /** How many of the message's deliveries are in this state. */
  deliveriesIn(hopper: Hopper, id: number, state: Delivery['state']): Promise<number>;
  /** How many deliveries (one per recipient) the message has. */
  deliveriesTotal(hopper: Hopper, id: number): Promise<number>;
  title(message: Message): string;
}

export interface ListQuery {
  status?: Status[];
  name?: string[];
}

export const DELIVERY_STATES = [
  'queued',
  'sending',
  'deferred',
  'held',
  'sent',
  'delivered',
  'bounced',
  'dropped',
  'failed',
  'cancelled',
  'skipped',
] as const satisfies readonly Delivery['state'][];

const PER_PAGE = 100;

export const KINDS: Record<'drop' | 'email', Kind> = {
  drop: {
    noun: 'Voicemail drop',
    command: 'drops',
    list: (hopper, userId, { status, name }) =>
      hopper.paginate('/v3/users/{user_id}/voicemail_drops', {
        path: { user_id: userId },
        query: { per_page: PER_PAGE, status, name },
      }),
    get: getDrop,
    setStatus: (hopper, id, status) =>
      unwrap(
        hopper.api.PUT('/v3/voicemail_drops/{id}', {
          params: { path: { id } },
          body: status === 'Scheduled' ? { status, send_type: 'Now' } : { status },
        }),
      ),
    deliveriesIn: async (hopper, id, state) =>
      (
        await unwrap(
          hopper.api.GET('/v3/voicemail_drops/{id}/deliveries', { params: { path: { id }, query: { state: [state], per_page: 1 } } }),
        )
      ).meta.total,
    deliveriesTotal: async (hopper, id) =>
      (await unwrap(hopper.api.GET('/v3/voicemail_drops/{id}/deliveries', { params: { path: { id }, query: { per_page: 1 } } }))).meta
        .total,
    title: (message) => (message as Drop).name,
  },
  email: {
    noun: 'Templated email',
    command: 'emails',
    list: (hopper, userId, { status, name }) =>
      hopper.paginate('/v3/users/{user_id}/templated_emails', {
        path: { user_id: userId },
        query: { per_page: PER_PAGE, status, subject: name },
      }),
    get: getEmail,
    setStatus: (hopper, id, status) =>
      unwrap(
        hopper.api.PUT('/v3/templated_emails/{id}', {
          params: { path: { id } },
          body: status === 'Scheduled' ? { status, send_type: 'Now' } : { status },
        }),
      ),
    deliveriesIn: async (hopper, id, state) =>
      (
        await unwrap(
          hopper.api.GET('/v3/templated_emails/{id}/deliveries', { params: { path: { id }, query: { state: [state], per_page: 1 } } }),
        )
      ).meta.total,
    deliveriesTotal: async (hopper, id) =>
      (await unwrap(hopper.api.GET('/v3/templated_emails/{id}/deliveries', { params: { path: { id }, query: { per_page: 1 } } }))).meta
        .total,
    title: (message) => (message as Email).subject,
  },
};

export async function listMessages(io: Io, hopper: Hopper, kind: Kind, userId: number, query: ListQuery, json: boolean): Promise<void> {
  const rows: (string | number | null)[][] = [];
  const all: Message[] = [];
  for await (const message of kind.list(hopper, userId, query)) {
    if (json) all.push(message);
    else
      rows.push([
        message.id,
        message.status,
        message.send_at,
        message.recipients.length,
        message.reporting.sent,
        message.reporting.delivered,
        kind.title(message),
      ]);
  }
  if (json) io.stdout.write(`${JSON.stringify(all, null, 2)}\n`);
  else if (rows.length === 0) io.stdout.write(`No ${kind.noun.toLowerCase()}s.\n`);
  else
    io.stdout.write(table(['id', 'status', 'send_at', 'recipients', 'sent', 'delivered', kind === KINDS.drop ? 'name' : 'subject'], rows));
}

export async function showMessage(io: Io, hopper: Hopper, kind: Kind, id: number, json: boolean): Promise<void> {
  const message = await kind.get(hopper, id);
  if (json) {
    io.stdout.write(`${JSON.stringify(message, null, 2)}\n`);
    return;
  }
  const fields: [string, unknown][] = Object.entries(message).filter(
    ([, value]) => value === null || typeof value !== 'object' || Array.isArray(value),
  );
  const rows = fields.map(([name, value]) => [name, Array.isArray(value) ? describeList(name, value) : format(value)]);
  io.stdout.write(`${kind.noun} ${message.id}\n${table(['field', 'value'], rows)}`);
}

function describeList(name: string, values: unknown[]): string {
  if (name !== 'recipients') return values.length === 0 ? '' : JSON.stringify(values);
  return (values as { group: string; label: string; value: number }[])
    .map(({ group, label, value }) => `${group}: ${label || value} (${group === 'Tags' ? 'tag' : 'contact'} ${value})`)
    .join(', ');
}

function format(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const line = text.replace(/\s+/g, ' ');
  return line.length > 100 ? `${line.slice(0, 99)}…` : line;
}

export async function sendMessage(io: Io, hopper: Hopper, kind: Kind, id: number): Promise<void> {
  const message = await kind.setStatus(hopper, id, 'Scheduled');
  io.stdout.write(`${kind.noun} ${id} is ${message.status}, to send now (send_at ${message.send_at}).\n`);
}

export async function cancelMessage(io: Io, hopper: Hopper, kind: Kind, id: number): Promise<void> {
  const current = await kind.get(hopper, id);
  let after: Message;
  if (current.status === 'Scheduled') {
    after = await kind.setStatus(hopper, id, 'Saved').catch(async (error: unknown) => {
      // It started sending in between: stop it instead.
      if ((await kind.get(hopper, id)).status === 'Sending') return kind.setStatus(hopper, id, 'Cancelled');
      throw error;
    });
  } else if (current.status === 'Sending') {
    after = await kind.setStatus(hopper, id, 'Cancelled');
  } else {
    throw new CliError(`${kind.noun} ${id} is ${current.status}: there is nothing to cancel (only Scheduled or Sending messages are).`);
  }
  const what = after.status === 'Saved' ? 'Saved: it will not be sent until you send it again' : `${after.status}: sending stopped`;
  io.stdout.write(`${kind.noun} ${id} is ${what}.\n`);
}

export async function reportMessage(io: Io, hopper: Hopper, kind: Kind, id: number, json: boolean): Promise<void> {
  const message = await kind.get(hopper, id);
  const counters = Object.entries(message.reporting).filter(([name]) => name !== 'date') as [string, number][];
  const totals = await Promise.all(DELIVERY_STATES.map((state) => kind.deliveriesIn(hopper, id, state)));
  const states = DELIVERY_STATES.map((state, i) => [state, totals[i] ?? 0] as [string, number]);
  if (json) {
    io.stdout.write(
      `${JSON.stringify({ id, status: message.status, counters: Object.fromEntries(counters), deliveries: Object.fromEntries(states) }, null, 2)}\n`,
    );
    return;
  }
  io.stdout.write(`${kind.noun} ${id} "${kind.title(message)}": ${message.status}\n\n`);
  io.stdout.write(table(['counter', 'count'], counters));
  io.stdout.write(`\n${table(['delivery state', 'deliveries'], [...states, ['total', totals.reduce((a, b) => a + b, 0)]])}`);
}
