import { isDeepStrictEqual } from 'node:util';
import type { AppContext } from '../app-context.ts';
import type { Db } from '../db/database.ts';
import { isUniqueViolation } from '../db/errors.ts';
import type { UserRef } from '../db/owned-rows.ts';
import { DomainError, validationError } from '../errors.ts';
import type { MessageKind } from './kinds.ts';
import { deletionRefusal } from './lifecycle.ts';
import { type CheckedMessage, externalIdHolder, type MessageView, softDeleteMessage, updateCheckedMessage } from './message-tables.ts';
import { emptyReporting } from './reporting.ts';

/**
 * The writes every message kind shares: create, update and delete, each keeping the status rules
 * and the due job of a scheduled message together with the row. Each kind's module
 * (`voicemail/drops.ts`, `email/templated-emails.ts`) checks its own fields and calls these.
 */
type WriteContext = Pick<AppContext, 'database' | 'queue' | 'clock'>;

const NOUNS: Record<MessageKind, string> = { voicemail_drop: 'Voicemail drop', templated_email: 'Templated email' };

/**
 * A write refused because another live message of the owner, of the same kind, has its external
 * id (the unique index `<table>_owner_external_id_key`, migration 0032): the 409 naming the holder.
 */
export async function externalIdTaken<T>(
  ctx: WriteContext,
  kind: MessageKind,
  userId: number,
  externalId: string | null | undefined,
  write: () => Promise<T>,
): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (
      !externalId ||
      !isUniqueViolation(error) ||
      !String((error as { constraint?: unknown }).constraint).endsWith('_owner_external_id_key')
    )
      throw error;
    const holder = (await externalIdHolder(ctx.database.db, kind, userId, externalId)) ?? '?';
    const noun = NOUNS[kind];
    throw new DomainError('conflict', `${noun} ${holder} already has the external id ${externalId}.`, {
      external_id: [`is already the external id of ${noun.toLowerCase()} ${holder}`],
    });
  }
}

/** Tries of an update or delete whose message changed under it before the conflict is reported. */
const MAX_ATTEMPTS = 3;

/**
 * A message that became Scheduled, or got a new send time, gets its due job in the same
 * transaction as the change: both are kept or neither. The job it may already have goes stale.
 */
async function scheduleIfDue(
  ctx: WriteContext,
  trx: Db,
  kind: MessageKind,
  id: number,
  before: { status: string; send_at: Date | null } | undefined,
  after: { status?: unknown; send_at?: unknown },
): Promise<void> {
  const sendAt = after.send_at;
  if (after.status !== 'Scheduled' || !(sendAt instanceof Date)) return;
  if (before?.status === 'Scheduled' && before.send_at?.getTime() === sendAt.getTime()) return;
  await ctx.queue.scheduleDue(trx, { kind, id, sendAt: sendAt.toISOString() });
}

/**
 * Creates a message and returns it as a read would (no counters yet). `insert` writes the row and
 * returns it whole. A message that is due (Scheduled) gets its due job in the same transaction:
 * both are kept or neither. Any other message is that one statement.
 */
export async function createMessage<Row extends CheckedMessage>(
  ctx: WriteContext,
  kind: MessageKind,
  owner: UserRef,
  values: { status?: unknown },
  insert: (db: Db) => Promise<Row>,
): Promise<MessageView<Row>> {
  const row =
    values.status === 'Scheduled'
      ? await ctx.database.db.transaction().execute(async (trx) => {
          const inserted = await insert(trx);
          await scheduleIfDue(ctx, trx, kind, inserted.id, undefined, inserted);
          return inserted;
        })
      : await insert(ctx.database.db);
  return { row, reporting: emptyReporting(), owner };
}

/**
 * Applies an update to the message as it was checked. `changes` validates the body against the
 * current row and returns the columns to write; a body that changes nothing writes nothing. If the
 * sending engine moved the message on meanwhile (Scheduled → Sending), it is read again (`reload`)
 * and checked against its new state (`reload` throws when it is gone). Returns the message as read
 * after the write.
 */
export async function updateMessage<View extends { row: CheckedMessage }>(
  ctx: WriteContext,
  kind: MessageKind,
  view: View,
  reload: (id: number) => Promise<View>,
  changes: (row: View['row']) => Promise<Record<string, unknown>>,
): Promise<View> {
  let current = view;
  for (let attempt = 1; ; attempt++) {
    const { row } = current;
    const values = await changes(row);
    if (isUnchanged(row, values)) return current;
    const written = await ctx.database.db.transaction().execute(async (trx) => {
      if (!(await updateCheckedMessage(trx, kind, row, values, ctx.clock()))) return false;
      await scheduleIfDue(ctx, trx, kind, row.id, row, {
        status: values.status ?? row.status,
        send_at: 'send_at' in values ? values.send_at : row.send_at,
      });
      return true;
    });
    current = await reload(row.id);
    if (written) return current;
    if (attempt >= MAX_ATTEMPTS) throw concurrentChange();
  }
}

/**
 * Soft-deletes a message. Deleted rows are invisible to the sending engine, so a scheduled message
 * is never sent; the status condition keeps a message that has just started sending from being
 * deleted (it is read again and refused).
 */
export async function deleteMessage<Row extends CheckedMessage>(
  ctx: WriteContext,
  kind: MessageKind,
  row: Row,
  reload: (id: number) => Promise<{ row: Row }>,
): Promise<void> {
  let current = row;
  for (let attempt = 1; ; attempt++) {
    const refusal = deletionRefusal(current.status);
    if (refusal) throw validationError({ status: [refusal] });
    if (await softDeleteMessage(ctx.database.db, kind, current, ctx.clock())) return;
    if (attempt >= MAX_ATTEMPTS) throw concurrentChange();
    current = (await reload(current.id)).row;
  }
}

function concurrentChange() {
  return validationError({ status: ['changed while the request was processed; read the message and try again'] });
}

/** True when every column of `values` already holds that value in `row`. */
function isUnchanged(row: object, values: Record<string, unknown>): boolean {
  const stored = row as Record<string, unknown>;
  return Object.entries(values).every(([column, value]) => sameValue(stored[column], value));
}

function sameValue(stored: unknown, next: unknown): boolean {
  if (stored instanceof Date && next instanceof Date) return stored.getTime() === next.getTime();
  // jsonb columns are written as JSON text and read back parsed.
  if (typeof next === 'string' && typeof stored === 'object' && stored !== null) return isDeepStrictEqual(stored, JSON.parse(next));
  return stored === next;
}
