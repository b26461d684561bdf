import type { Updateable } from 'kysely';
import type { Db } from '../db/database.ts';
import type { ContactRow, ContactStatus, ContactsTable } from '../db/schema.ts';
import { formatTimestamp } from '../time.ts';
import { setContactTags, tagNamesByContact } from './tags.ts';

export const CONTACT_STATUSES = [
  'Subscribed',
  'Unsubscribed',
  'Inactive - Hard Bounce',
  'Inactive - Spam Complaint',
  'Inactive - Invalid Email Address',
] as const satisfies readonly ContactStatus[];

/** The writable scalar fields of a contact, already validated and normalised. */
export type ContactFields = Pick<Updateable<ContactsTable>, 'first_name' | 'last_name' | 'email' | 'phone' | 'time_zone' | 'status'>;

/** "First Last", either part alone, or null for a contact known only by address or number. */
export function contactFullName(row: Pick<ContactRow, 'first_name' | 'last_name'>): string | null {
  return [row.first_name, row.last_name].filter(Boolean).join(' ') || null;
}

/** The API shape of a contact: the one place contact rows become JSON. */
export function toApiContact(row: ContactRow, tags: string[]) {
  return {
    id: row.id,
    user_id: row.user_id,
    first_name: row.first_name,
    last_name: row.last_name,
    full_name: contactFullName(row),
    email: row.email,
    phone: row.phone,
    time_zone: row.time_zone,
    status: row.status,
    tags,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatTimestamp(row.deleted_at),
  };
}

/** API shapes for a page of contacts, their tags read in one query. */
export async function toApiContacts(db: Db, userId: number, rows: ContactRow[]) {
  const tags = await tagNamesByContact(
    db,
    userId,
    rows.map((row) => row.id),
  );
  return rows.map((row) => toApiContact(row, tags.get(row.id) ?? []));
}

/** Creates a contact with its tags in one transaction: a failure leaves neither behind. */
export async function insertContact(db: Db, userId: number, fields: ContactFields, tags: readonly string[]) {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('contacts')
      .values({ ...fields, user_id: userId })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toApiContact(row, await setContactTags(trx, userId, row.id, tags));
  });
}

/**
 * Applies the fields present; `tags`, when given, replaces the contact's whole set. Undefined
 * when the contact was deleted meanwhile.
 */
export async function updateContact(db: Db, contact: ContactRow, fields: ContactFields, tags: readonly string[] | undefined) {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable('contacts')
      .set({ ...fields, updated_at: new Date() })
      .where('user_id', '=', contact.user_id)
      .where('id', '=', contact.id)
      .where('deleted_at', 'is', null)
      .returningAll()
      .executeTakeFirst();
    if (!row) return undefined;
    const names =
      tags === undefined
        ? ((await tagNamesByContact(trx, row.user_id, [row.id])).get(row.id) ?? [])
        : await setContactTags(trx, row.user_id, row.id, tags);
    return toApiContact(row, names);
  });
}

/** Soft delete: the row and its tag links stay for the record; every read skips it from now on. */
export async function deleteContact(db: Db, contact: ContactRow): Promise<void> {
  await db
    .updateTable('contacts')
    .set({ deleted_at: new Date() })
    .where('user_id', '=', contact.user_id)
    .where('id', '=', contact.id)
    .execute();
}
