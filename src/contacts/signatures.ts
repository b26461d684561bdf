import type { Db } from '../db/database.ts';
import type { SignatureRow } from '../db/schema.ts';
import { formatTimestamp } from '../time.ts';

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

/** `body` is sanitised email HTML by the time it gets here. */
export async function insertSignature(db: Db, userId: number, fields: { name: string; body: string }): Promise<SignatureRow> {
  return db
    .insertInto('signatures')
    .values({ ...fields, user_id: userId })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Undefined when the signature was deleted meanwhile. */
export async function updateSignature(
  db: Db,
  signature: SignatureRow,
  fields: { name?: string; body?: string },
): Promise<SignatureRow | undefined> {
  return db
    .updateTable('signatures')
    .set({ ...fields, updated_at: new Date() })
    .where('user_id', '=', signature.user_id)
    .where('id', '=', signature.id)
    .where('deleted_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

/** Soft delete: templated emails that used the signature keep a row to point at. */
export async function deleteSignature(db: Db, signature: SignatureRow): Promise<void> {
  await db
    .updateTable('signatures')
    .set({ deleted_at: new Date() })
    .where('user_id', '=', signature.user_id)
    .where('id', '=', signature.id)
    .execute();
}
