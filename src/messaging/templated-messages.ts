import type { Insertable, Updateable } from 'kysely';
import type { Db } from '../db/database.ts';
import type { TemplatedMessageRow, TemplatedMessagesTable } from '../db/schema.ts';
import { formatTimestamp } from '../time.ts';

/** Greetings a template (and a templated email) gets when none is given (DESIGN.md §6). */
export const DEFAULT_GREETINGS = {
  greeting_with_first_name: 'Hi {{first_name}},',
  greeting_without_first_name: 'Hi,',
} as const;

export type NewTemplatedMessage = Omit<Insertable<TemplatedMessagesTable>, 'id' | 'created_at' | 'updated_at' | 'deleted_at'>;
export type TemplatedMessageChanges = Omit<Updateable<TemplatedMessagesTable>, 'id' | 'created_at' | 'updated_at' | 'deleted_at'>;

/** The API shape of a library template: the one place its rows become JSON. */
export function toApiTemplatedMessage(row: TemplatedMessageRow) {
  return {
    id: row.id,
    name: row.name,
    subject: row.subject,
    description: row.description,
    greeting_with_first_name: row.greeting_with_first_name,
    greeting_without_first_name: row.greeting_without_first_name,
    body: row.body,
    closing: row.closing,
    ps_line: row.ps_line,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatTimestamp(row.deleted_at),
  };
}

/** A live template, or undefined when there is none or it was deleted. */
export async function findTemplatedMessage(db: Db, id: number): Promise<TemplatedMessageRow | undefined> {
  return db.selectFrom('templated_messages').selectAll().where('id', '=', id).where('deleted_at', 'is', null).executeTakeFirst();
}

export async function insertTemplatedMessage(db: Db, values: NewTemplatedMessage): Promise<TemplatedMessageRow> {
  return db.insertInto('templated_messages').values(values).returningAll().executeTakeFirstOrThrow();
}

/** Undefined when the template is missing or deleted. */
export async function updateTemplatedMessage(
  db: Db,
  id: number,
  changes: TemplatedMessageChanges,
): Promise<TemplatedMessageRow | undefined> {
  return db
    .updateTable('templated_messages')
    .set({ ...changes, updated_at: new Date() })
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

/**
 * Soft delete: templated emails created from the template keep their copies and their
 * `templated_message_id`. False when there was nothing live to delete.
 */
export async function deleteTemplatedMessage(db: Db, id: number): Promise<boolean> {
  const result = await db
    .updateTable('templated_messages')
    .set({ deleted_at: new Date() })
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
