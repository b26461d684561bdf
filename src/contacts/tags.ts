import { sql } from 'kysely';
import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import { uniqueOn } from '../db/errors.ts';
import { findOwnedRow } from '../db/owned-rows.ts';
import type { TagRow } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { type DomainError, duplicate, validationError } from '../errors.ts';
import { Id, Timestamp, WritableBody } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';

/** Tags: owned like contacts; contacts also create them by naming them. Deleting one is final. */

export const Tag = Type.Object({
  id: Id,
  name: Type.String(),
  contacts_count: Type.Integer({ minimum: 0, description: 'Live contacts carrying the tag' }),
  created_at: Timestamp,
  updated_at: Timestamp,
});
const Name = Type.String({ minLength: 1, maxLength: 255, description: 'Unique per user, ignoring case' });
const READ_ONLY = ['id', 'contacts_count', 'created_at', 'updated_at'];
export const CreateTagBody = WritableBody({ name: Name }, READ_ONLY);
export const UpdateTagBody = WritableBody({ name: Type.Optional(Name) }, READ_ONLY);
export const TAG_FILTERS: Filters = { id: { kind: 'id', column: 'id' }, name: { kind: 'text', column: 'name' } };

function tagName(name: string): string {
  const trimmed = name.trim();
  if (trimmed === '') throw validationError({ name: ['must not be blank'] });
  return trimmed;
}

/** The API shape of a tag: the one place tag rows become JSON. */
export function toApiTag(row: TagRow, contactsCount: number) {
  return {
    id: row.id,
    name: row.name,
    contacts_count: contactsCount,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
  };
}

/** Tag names compare case-insensitively, after trimming, the way the unique index sees them. */
export function tagKey(name: string): string {
  return name.trim().toLowerCase();
}

/**
 * How many live contacts carry each tag. Counted on read rather than kept in a column: a counter
 * would have to follow every contact delete and tag change. Soft-deleted contacts keep their
 * links, so they are subtracted: an anti-join against the small index of deleted contacts.
 *
 *   SELECT tag_id, count(*) FROM contact_tags ct
 *   WHERE ct.user_id = $1 AND ct.tag_id IN (…)
 *     AND NOT EXISTS (SELECT 1 FROM contacts c
 *                     WHERE c.user_id = ct.user_id AND c.id = ct.contact_id AND c.deleted_at IS NOT NULL)
 *   GROUP BY tag_id
 */
async function contactCounts(db: Db, userId: number, tagIds: readonly number[]): Promise<Map<number, number>> {
  if (tagIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('contact_tags as ct')
    .select(['ct.tag_id', sql<string>`count(*)`.as('n')])
    .where('ct.user_id', '=', userId)
    .where('ct.tag_id', 'in', tagIds)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('contacts as c')
            .select(sql`1`.as('one'))
            .whereRef('c.user_id', '=', 'ct.user_id')
            .whereRef('c.id', '=', 'ct.contact_id')
            .where('c.deleted_at', 'is not', null),
        ),
      ),
    )
    .groupBy('ct.tag_id')
    .execute();
  return new Map(rows.map((r) => [r.tag_id, Number(r.n)]));
}

/** The owner's tags of these ids (those that exist). */
export async function findTags(db: Db, userId: number, ids: readonly number[]): Promise<TagRow[]> {
  if (ids.length === 0) return [];
  return db.selectFrom('tags').selectAll().where('user_id', '=', userId).where('id', 'in', ids).execute();
}

export function findTag(db: Db, id: number) {
  return findOwnedRow(db, db.selectFrom('tags').selectAll().where('id', '=', id));
}

/** A tag's API shape with its live contacts counted. */
export async function withContactsCount(db: Db, row: TagRow) {
  return toApiTag(row, (await contactCounts(db, row.user_id, [row.id])).get(row.id) ?? 0);
}

/** One page of an owner's tags, filtered by `TAG_FILTERS`, as API shapes with their counts. */
export async function searchTags(db: Db, userId: number, params: SearchParams) {
  const result = await runSearch(db.selectFrom('tags').selectAll().where('user_id', '=', userId), TAG_FILTERS, params, 'id');
  const counts = await contactCounts(
    db,
    userId,
    result.rows.map((row) => row.id),
  );
  return { ...result, rows: result.rows.map((row) => toApiTag(row, counts.get(row.id) ?? 0)) };
}

/** The owner has a tag of this name (in any case). */
function nameHeld(name: string): DomainError {
  return duplicate('name', `There is already a tag named ${tagName(name)}.`, 'is already the name of another tag');
}

export async function createTag(db: Db, userId: number, name: string, now: Date): Promise<TagRow> {
  return uniqueOn(
    () => nameHeld(name),
    db
      .insertInto('tags')
      .values({ user_id: userId, name: tagName(name), created_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow(),
  );
}

/** Undefined when the tag was deleted meanwhile. */
export async function renameTag(db: Db, tag: TagRow, name: string, now: Date): Promise<TagRow | undefined> {
  return uniqueOn(
    () => nameHeld(name),
    db
      .updateTable('tags')
      .set({ name: tagName(name), updated_at: now })
      .where('user_id', '=', tag.user_id)
      .where('id', '=', tag.id)
      .returningAll()
      .executeTakeFirst(),
  );
}

/** Deletes a tag for good; its foreign key takes it off every contact in the same statement. */
export async function deleteTag(db: Db, tag: TagRow): Promise<void> {
  await db.deleteFrom('tags').where('user_id', '=', tag.user_id).where('id', '=', tag.id).execute();
}

/**
 * The owner's tags with these names, creating the ones not yet known. ON CONFLICT lets two
 * requests introduce the same new name at once: the second waits for the first and then finds
 * its row. A name typed in another case finds the existing tag, whose case is kept. Names are
 * compared with SQL's lower() on both sides, the function the unique index uses, since
 * JavaScript's lower-casing differs from the database's for some letters.
 */
export async function ensureTags(trx: Db, userId: number, names: readonly string[], now: Date): Promise<TagRow[]> {
  if (names.length === 0) return [];
  // Inserting in one fixed order keeps two overlapping writers from deadlocking on each other.
  const ordered = [...names].sort();
  await trx
    .insertInto('tags')
    .values(ordered.map((name) => ({ user_id: userId, name, created_at: now, updated_at: now })))
    .onConflict((oc) => oc.expression(sql`user_id, lower(name)`).doNothing())
    .execute();
  return trx
    .selectFrom('tags')
    .selectAll()
    .where('user_id', '=', userId)
    .where((eb) =>
      eb(
        eb.fn('lower', ['name']),
        'in',
        ordered.map((name) => eb.fn('lower', [eb.val(name)])),
      ),
    )
    .execute();
}

/** Makes a contact carry exactly these tags (by name), creating unknown ones; returns their names. */
export async function setContactTags(trx: Db, userId: number, contactId: number, names: readonly string[], now: Date): Promise<string[]> {
  const tags = await ensureTags(trx, userId, names, now);
  const ids = tags.map((tag) => tag.id);
  let stale = trx.deleteFrom('contact_tags').where('user_id', '=', userId).where('contact_id', '=', contactId);
  if (ids.length > 0) stale = stale.where('tag_id', 'not in', ids);
  await stale.execute();
  if (ids.length > 0) {
    await trx
      .insertInto('contact_tags')
      .values(ids.map((tagId) => ({ user_id: userId, contact_id: contactId, tag_id: tagId })))
      .onConflict((oc) => oc.doNothing())
      .execute();
  }
  return sortNames(tags.map((tag) => tag.name));
}

/** Adds tags to contacts (never removes one); links already there stay. */
export async function linkContactTags(trx: Db, userId: number, links: readonly { contact_id: number; tag_id: number }[]): Promise<void> {
  if (links.length === 0) return;
  await sql`INSERT INTO contact_tags (user_id, contact_id, tag_id)
    SELECT ${userId}, unnest(${links.map((link) => link.contact_id)}::bigint[]), unnest(${links.map((link) => link.tag_id)}::bigint[])
    ON CONFLICT DO NOTHING`.execute(trx);
}

/** The tag names of each contact, for a page of contacts in one query. */
export async function tagNamesByContact(db: Db, userId: number, contactIds: readonly number[]): Promise<Map<number, string[]>> {
  const byContact = new Map<number, string[]>(contactIds.map((id) => [id, []]));
  if (contactIds.length === 0) return byContact;
  const rows = await db
    .selectFrom('contact_tags as ct')
    .innerJoin('tags as t', (join) => join.onRef('t.id', '=', 'ct.tag_id').onRef('t.user_id', '=', 'ct.user_id'))
    .select(['ct.contact_id', 't.name'])
    .where('ct.user_id', '=', userId)
    .where('ct.contact_id', 'in', contactIds)
    .execute();
  for (const row of rows) byContact.get(row.contact_id)?.push(row.name);
  for (const names of byContact.values()) sortNames(names);
  return byContact;
}

/** Tags read in alphabetical order, whatever their case. */
function sortNames(names: string[]): string[] {
  return names.sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase()) || a.localeCompare(b));
}
