import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import { findOwnedRow } from '../db/owned-rows.ts';
import type { SignatureRow } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { type FieldErrors, throwIfAny } from '../errors.ts';
import { Id, Nullable, Timestamp, WritableBody } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';
import { isBlankHtml, sanitizeEmailHtml } from './email-html.ts';

/** Email signatures: owned like contacts; templated emails name one by `signature_id`. */

export const Signature = Type.Object({
  id: Id,
  name: Type.String(),
  body: Type.String({ description: 'Email HTML, sanitised on save' }),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
});
const fields = {
  name: Type.String({ minLength: 1, maxLength: 255 }),
  body: Type.String({
    minLength: 1,
    maxLength: 100_000,
    description: 'Email HTML: tables, inline styles and images are kept; scripts, event handlers and forms are removed',
  }),
};
const READ_ONLY = ['id', 'created_at', 'updated_at', 'deleted_at'];
export const CreateSignatureBody = WritableBody(fields, READ_ONLY);
export const UpdateSignatureBody = WritableBody(Type.Partial(Type.Object(fields)).properties, READ_ONLY);
export const SIGNATURE_FILTERS: Filters = { id: { kind: 'id', column: 'id' }, name: { kind: 'text', column: 'name' } };

/** The API shape of a signature: the one place signature rows become JSON. */
export function toApiSignature(row: SignatureRow) {
  return {
    id: row.id,
    name: row.name,
    body: row.body,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatTimestamp(row.deleted_at),
  };
}

/** Trimmed name and sanitised body, for the fields present. */
function signatureChanges(body: { name?: string; body?: string }): { name?: string; body?: string } {
  const errors: FieldErrors = {};
  const changes: { name?: string; body?: string } = {};
  if (body.name !== undefined) {
    changes.name = body.name.trim();
    if (changes.name === '') errors.name = ['must not be blank'];
  }
  if (body.body !== undefined) {
    changes.body = sanitizeEmailHtml(body.body);
    if (isBlankHtml(changes.body)) errors.body = ['has no content once unsafe HTML is removed'];
  }
  throwIfAny(errors);
  return changes;
}

export function findSignature(db: Db, id: number) {
  return findOwnedRow(db, db.selectFrom('signatures').selectAll().where('id', '=', id).where('deleted_at', 'is', null));
}

/**
 * The HTML of a signature of `userId`, or undefined. A deleted one is found only `evenDeleted`:
 * an email scheduled before its signature was deleted still goes out signed.
 */
export async function findSignatureBody(db: Db, userId: number, id: number, { evenDeleted = false } = {}): Promise<string | undefined> {
  let query = db.selectFrom('signatures').select('body').where('user_id', '=', userId).where('id', '=', id);
  if (!evenDeleted) query = query.where('deleted_at', 'is', null);
  return (await query.executeTakeFirst())?.body;
}

export function searchSignatures(db: Db, userId: number, params: SearchParams) {
  const query = db.selectFrom('signatures').selectAll().where('user_id', '=', userId).where('deleted_at', 'is', null);
  return runSearch(query, SIGNATURE_FILTERS, params, 'id');
}

export async function createSignature(db: Db, userId: number, body: { name: string; body: string }, now: Date): Promise<SignatureRow> {
  const { name = '', body: html = '' } = signatureChanges(body);
  return db
    .insertInto('signatures')
    .values({ name, body: html, user_id: userId, created_at: now, updated_at: now })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Undefined when the signature was deleted meanwhile. */
export async function updateSignature(
  db: Db,
  signature: SignatureRow,
  body: { name?: string; body?: string },
  now: Date,
): Promise<SignatureRow | undefined> {
  return db
    .updateTable('signatures')
    .set({ ...signatureChanges(body), updated_at: now })
    .where('user_id', '=', signature.user_id)
    .where('id', '=', signature.id)
    .where('deleted_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

/** Soft delete: templated emails that used the signature keep a row to point at. */
export async function deleteSignature(db: Db, signature: SignatureRow, now: Date): Promise<void> {
  await db
    .updateTable('signatures')
    .set({ deleted_at: now })
    .where('user_id', '=', signature.user_id)
    .where('id', '=', signature.id)
    .execute();
}
