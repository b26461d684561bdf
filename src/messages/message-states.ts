import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { MESSAGE_KINDS, MESSAGE_TABLES, type MessageKind, type MessageRows } from './kinds.ts';

/**
 * The moves the sending engine makes on a message's own row (DESIGN.md §8): `Scheduled` →
 * `Sending` when it is due, the note that its recipients are resolved, and `Sent` or `Failed` at
 * the end. Clients' moves (Saved, Scheduled, Cancelled) are the writes of message-writes.ts.
 */

/**
 * `Scheduled` → `Sending`, only if the message still has the send time its due job was made for
 * (a job left behind by a reschedule, an unschedule or a delete changes nothing). The row as it
 * now is, or undefined.
 */
export async function startSending<K extends MessageKind>(
  db: Db,
  kind: K,
  id: number,
  sendAt: Date,
  now: Date,
): Promise<MessageRows[K] | undefined> {
  const { rows } = await sql<MessageRows[K]>`
    UPDATE ${sql.table(MESSAGE_TABLES[kind])} SET status = 'Sending', sending_at = ${now}, updated_at = ${now}
    WHERE id = ${id} AND status = 'Scheduled' AND send_at = ${sendAt} AND deleted_at IS NULL
    RETURNING *`.execute(db);
  return rows[0];
}

/** The message's row, deleted or not (the engine decides what a deleted one means). */
export async function loadMessage<K extends MessageKind>(db: Db, kind: K, id: number): Promise<MessageRows[K] | undefined> {
  const { rows } = await sql<MessageRows[K]>`SELECT * FROM ${sql.table(MESSAGE_TABLES[kind])} WHERE id = ${id}`.execute(db);
  return rows[0];
}

/** The message's status now (undefined once it is gone): a running batch checks it for a cancel. */
export async function messageStatus(db: Db, kind: MessageKind, id: number): Promise<string | undefined> {
  const { rows } = await sql<{ status: string }>`SELECT status FROM ${sql.table(MESSAGE_TABLES[kind])} WHERE id = ${id}`.execute(db);
  return rows[0]?.status;
}

/** Notes that the message's recipients are resolved into deliveries. */
export async function markResolved(db: Db, kind: MessageKind, id: number, now: Date): Promise<void> {
  await sql`UPDATE ${sql.table(MESSAGE_TABLES[kind])} SET resolved_at = ${now} WHERE id = ${id}`.execute(db);
}

/** `Sent`, or `Failed` with a reason; only a message still `Sending` changes (once). True when it did. */
export async function finishSending(db: Db, kind: MessageKind, id: number, failure: string | null, now: Date): Promise<boolean> {
  const status = failure ? 'Failed' : 'Sent';
  const result = await sql`
    UPDATE ${sql.table(MESSAGE_TABLES[kind])} SET status = ${status}, reason = ${failure}, sent_at = ${now}, updated_at = ${now}
    WHERE id = ${id} AND status = 'Sending'`.execute(db);
  return Number(result.numAffectedRows ?? 0) > 0;
}

/** Every live message that is sending, of either kind. */
export async function sendingMessages(db: Db): Promise<{ kind: MessageKind; id: number }[]> {
  const found: { kind: MessageKind; id: number }[] = [];
  for (const kind of MESSAGE_KINDS) {
    const rows = await db
      .selectFrom(MESSAGE_TABLES[kind])
      .select('id')
      .where('status', '=', 'Sending')
      .where('deleted_at', 'is', null)
      .execute();
    for (const { id } of rows) found.push({ kind, id });
  }
  return found;
}
