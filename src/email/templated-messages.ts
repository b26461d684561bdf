import type { Updateable } from 'kysely';
import { type Static, Type } from 'typebox';
import type { Db } from '../db/database.ts';
import type { TemplatedMessageRow, TemplatedMessagesTable } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { type FieldErrors, throwIfAny } from '../errors.ts';
import { Id, Nullable, Timestamp, WritableBody } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';
import { isBlankHtml, sanitizeEmailHtml } from './email-html.ts';

/** The templated-message library: every user reads it, Administrators maintain it (docs/contacts.md, "The templated message library"). */

/** Greetings a template (and a templated email) gets when none is given (docs/contacts.md, "The templated message library"). */
export const DEFAULT_GREETINGS = {
  greeting_with_first_name: 'Hi {{first_name}},',
  greeting_without_first_name: 'Hi,',
} as const;

type TemplatedMessageChanges = Omit<Updateable<TemplatedMessagesTable>, 'id' | 'created_at' | 'updated_at' | 'deleted_at'>;

export const TemplatedMessage = Type.Object({
  id: Id,
  name: Type.String(),
  subject: Type.String(),
  description: Nullable(Type.String()),
  greeting_with_first_name: Type.String(),
  greeting_without_first_name: Type.String(),
  body: Type.String({ description: 'Email HTML, sanitised on save' }),
  closing: Nullable(Type.String()),
  ps_line: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
});

const required = {
  name: Type.String({ minLength: 1, maxLength: 255 }),
  subject: Type.String({ minLength: 1, maxLength: 998, description: 'One line; merge tags such as {{first_name}} work' }),
  body: Type.String({ minLength: 1, maxLength: 500_000, description: 'Email HTML; unsafe markup is removed on save' }),
};
const optional = {
  description: Nullable(Type.String({ maxLength: 1000 })),
  greeting_with_first_name: Type.String({ maxLength: 255, description: `Default: ${DEFAULT_GREETINGS.greeting_with_first_name}` }),
  greeting_without_first_name: Type.String({ maxLength: 255, description: `Default: ${DEFAULT_GREETINGS.greeting_without_first_name}` }),
  closing: Nullable(Type.String({ maxLength: 255 })),
  ps_line: Nullable(Type.String({ maxLength: 1000 })),
};
const READ_ONLY = ['id', 'created_at', 'updated_at', 'deleted_at'];
export const CreateTemplatedMessageBody = WritableBody({ ...required, ...Type.Partial(Type.Object(optional)).properties }, READ_ONLY);
export const UpdateTemplatedMessageBody = WritableBody(Type.Partial(Type.Object({ ...required, ...optional })).properties, READ_ONLY);
const TEXT = (column: string) => ({ kind: 'text', column }) as const;
export const TEMPLATED_MESSAGE_FILTERS: Filters = {
  id: { kind: 'id', column: 'id' },
  name: TEXT('name'),
  subject: TEXT('subject'),
  description: TEXT('description'),
};
const WRITABLE = [...Object.keys(required), ...Object.keys(optional)] as (keyof TemplatedMessageChanges)[];

/** The writable fields present, checked and cleaned: names trimmed, subject on one line, body sanitised. */
function templateChanges(body: Partial<Static<typeof UpdateTemplatedMessageBody>>): TemplatedMessageChanges {
  const errors: FieldErrors = {};
  const changes: Record<string, unknown> = {};
  for (const key of WRITABLE) if (body[key] !== undefined) changes[key] = body[key];
  if (body.name !== undefined) {
    changes.name = body.name.trim();
    if (changes.name === '') errors.name = ['must not be blank'];
  }
  if (body.subject !== undefined) {
    changes.subject = body.subject.trim();
    // The subject becomes a mail header: a line break would start a header of the caller's choosing.
    if (/[\r\n]/.test(body.subject)) errors.subject = ['must be a single line'];
    else if (changes.subject === '') errors.subject = ['must not be blank'];
  }
  if (body.body !== undefined) {
    changes.body = sanitizeEmailHtml(body.body);
    if (isBlankHtml(changes.body as string)) errors.body = ['has no content once unsafe HTML is removed'];
  }
  throwIfAny(errors);
  return changes as TemplatedMessageChanges;
}

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

export function searchTemplatedMessages(db: Db, params: SearchParams) {
  const query = db.selectFrom('templated_messages').selectAll().where('deleted_at', 'is', null);
  return runSearch(query, TEMPLATED_MESSAGE_FILTERS, params, 'id');
}

export async function createTemplatedMessage(
  db: Db,
  body: Static<typeof CreateTemplatedMessageBody>,
  now: Date,
): Promise<TemplatedMessageRow> {
  const values = {
    ...DEFAULT_GREETINGS,
    ...(templateChanges(body) as Required<Pick<TemplatedMessageChanges, 'name' | 'subject' | 'body'>>),
    created_at: now,
    updated_at: now,
  };
  return db.insertInto('templated_messages').values(values).returningAll().executeTakeFirstOrThrow();
}

/** Undefined when the template is missing or deleted. */
export async function updateTemplatedMessage(
  db: Db,
  id: number,
  body: Static<typeof UpdateTemplatedMessageBody>,
  now: Date,
): Promise<TemplatedMessageRow | undefined> {
  return db
    .updateTable('templated_messages')
    .set({ ...templateChanges(body), updated_at: now })
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

/**
 * Soft delete: templated emails created from the template keep their copies and their
 * `templated_message_id`. False when there was nothing live to delete.
 */
export async function deleteTemplatedMessage(db: Db, id: number, now: Date): Promise<boolean> {
  const result = await db
    .updateTable('templated_messages')
    .set({ deleted_at: now })
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
