import { type SqlBool, sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { precompiled } from '../db/precompiled.ts';
import type { MediaRow, VoicemailDropRow } from '../db/schema.ts';
import { toApiMedia } from '../media/media.ts';
import { type MessageView, selectMessages, toMessageView } from '../messaging/message-view.ts';
import { formatTimestamp } from '../time.ts';

const MEDIA_COLUMNS = [
  'id',
  'user_id',
  'name',
  'file_name',
  'collection_name',
  'mime_type',
  'size',
  'duration_seconds',
  'token',
  'storage_key',
  'created_at',
  'updated_at',
  'deleted_at',
] as const satisfies readonly (keyof MediaRow)[];

export type DropView = MessageView<VoicemailDropRow>;

/** Drops with their embedded media item, in the one query of `selectMessages`. */
export function selectDrops(db: Db) {
  return selectMessages(db, 'voicemail_drop')
    .innerJoin('media as m', 'm.id', 'msg.media_id')
    .select(MEDIA_COLUMNS.map((column) => sql.ref(`m.${column}`).as(`m__${column}`)));
}

// The read of every GET, PUT and DELETE: compiled once, not per request.
const dropById = precompiled<[number], object>(1, (db, id) => selectDrops(db).where('msg.id', '=', id));

export async function findDrop(db: Db, id: number): Promise<DropView | undefined> {
  const [joined] = await dropById(db, id);
  return joined && toMessageView<VoicemailDropRow>(joined);
}

const dropsByIds = precompiled<[number[]], object>(1, (db, ids) => selectDrops(db).where(sql<SqlBool>`msg.id = any(${ids}::bigint[])`));

/** The live drops among `ids` as `selectDrops` rows, in no particular order: the rows of a search page. */
export async function findDropRows(db: Db, ids: number[]): Promise<object[]> {
  return ids.length > 0 ? dropsByIds(db, ids) : [];
}

/** The API shape of a voicemail drop (the specification's table): the one place drops become JSON. */
export function toApiVoicemailDrop(view: DropView, publicUrl: string) {
  const { row } = view;
  return {
    id: row.id,
    provider: row.provider,
    media_id: row.media_id,
    callback_number: row.callback_number,
    name: row.name,
    description: row.description,
    status: row.status,
    reason: row.reason,
    send_type: row.send_type,
    send_at: formatTimestamp(row.send_at),
    sending_at: formatTimestamp(row.sending_at),
    sent_at: formatTimestamp(row.sent_at),
    recipients: row.recipients,
    reporting: view.reporting,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatTimestamp(row.deleted_at),
    media: toApiMedia(view.extras.m as unknown as MediaRow, publicUrl),
  };
}
