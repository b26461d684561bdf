import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import { findOwnedRow } from '../db/owned-rows.ts';
import { precompiled } from '../db/precompiled.ts';
import type { MediaRow, NewMedia } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { DomainError, type FieldErrors, notFound } from '../errors.ts';
import { Id, Nullable, Timestamp, WritableBody } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';
import { AUDIO_COLLECTION } from './detect.ts';
import type { MediaStorage } from './store.ts';

/** The specification's media table; voicemail drops embed it as `media`. */
export const Media = Type.Object({
  id: Id,
  name: Type.String(),
  file_name: Type.String(),
  collection_name: Type.String(),
  mime_type: Type.String({ examples: ['audio/mpeg'] }),
  size: Type.Integer({ minimum: 0, description: 'Bytes' }),
  readable_size: Type.String({ examples: ['649.17 KB'] }),
  full_url: Type.String({ description: 'Public, unguessable address of the file; no key needed' }),
  download_url: Type.String({ description: 'The file as an attachment; needs a key' }),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
});

/** The body of a fetch by URL (`POST /users/{user_id}/media/import`). */
export const MediaFromUrl = WritableBody(
  {
    full_url: Type.String({ minLength: 1, maxLength: 2048, description: 'http(s) address Hopper fetches the file from' }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    collection_name: Type.Optional(Type.String({ minLength: 1, maxLength: 64, default: AUDIO_COLLECTION })),
  },
  ['id', 'file_name', 'mime_type', 'size', 'readable_size', 'download_url', 'created_at', 'updated_at', 'deleted_at'],
);
Object.assign(MediaFromUrl, {
  title: 'MediaFromUrl',
  examples: [{ full_url: 'https://files.example.com/open-house.wav', name: 'open-house' }],
});

/**
 * The upload form (multipart/form-data), for the document: the form is read part by part as it
 * arrives (http/media-form.ts), with `mediaFieldProblems`. Without `type`, the schema does not
 * refuse the (absent) parsed body of a multipart request (the document adds it).
 */
const uploadFields = {
  file: Type.String({ format: 'binary', description: 'The file; its type is judged from its bytes' }),
  name: Type.String({ maxLength: 255, description: 'Defaults to the file name without extension' }),
  collection_name: Type.String({ maxLength: 64, default: AUDIO_COLLECTION }),
};
export const MediaUpload = Type.Unsafe({ title: 'MediaUpload', properties: uploadFields, required: ['file'] });
/** The fields an upload form may have. */
export const UPLOAD_FIELDS: ReadonlySet<string> = new Set(Object.keys(uploadFields));

const COLLECTION_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** The rules on `name` and `collection_name` that JSON schema does not cover (and forms need in full). */
export function mediaFieldProblems(name: string | undefined, collection: string | undefined): FieldErrors {
  const errors: FieldErrors = {};
  if (name !== undefined) {
    const length = [...name].length;
    if (length === 0) errors.name = ['must not be empty'];
    else if (length > 255) errors.name = ['must be at most 255 characters'];
    else if (name.includes('\u0000')) errors.name = ['must not contain NUL characters'];
  }
  if (collection !== undefined && !COLLECTION_NAME.test(collection)) {
    errors.collection_name = ['must be 1 to 64 lower-case letters, digits, "-" or "_", starting with a letter or digit'];
  }
  return errors;
}

export const MEDIA_FILTERS: Filters = {
  id: { kind: 'id', column: 'id' },
  name: { kind: 'text', column: 'name' },
  file_name: { kind: 'text', column: 'file_name' },
  collection_name: { kind: 'exact', column: 'collection_name' },
  mime_type: { kind: 'exact', column: 'mime_type' },
};

const UNITS = ['B', 'KB', 'MB', 'GB', 'TB'] as const;

/** "649.17 KB": 1024-based units with two decimals (whole bytes below 1 KB, where decimals mean nothing). */
export function readableSize(bytes: number): string {
  let value = bytes;
  let unit = 0;
  // Compare the rounded value, so 1023.999 KB reads "1.00 MB" rather than "1024.00 KB".
  while (unit < UNITS.length - 1 && Number(value.toFixed(2)) >= 1024) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(2)} ${UNITS[unit]}`;
}

/** The public address of the file: no key needed, unguessable thanks to the token. */
export function publicFileUrl(publicUrl: string, row: Pick<MediaRow, 'token' | 'file_name'>): string {
  return `${publicUrl}/media/${row.token}/${encodeURIComponent(row.file_name)}`;
}

/**
 * The API shape of a media item (the specification's media table): the one place rows become
 * JSON, also used to embed `media` in voicemail drops. Deleted rows map too, with `deleted_at` set.
 */
export function toApiMedia(row: MediaRow, publicUrl: string) {
  return {
    id: row.id,
    name: row.name,
    file_name: row.file_name,
    collection_name: row.collection_name,
    mime_type: row.mime_type,
    size: row.size,
    readable_size: readableSize(row.size),
    full_url: publicFileUrl(publicUrl, row),
    download_url: `${publicUrl}/v3/media/${row.id}/download`,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatTimestamp(row.deleted_at),
  };
}

export function isAudioMedia(row: Pick<MediaRow, 'mime_type'>): boolean {
  return row.mime_type.startsWith('audio/');
}

export async function insertMedia(db: Db, media: NewMedia): Promise<MediaRow> {
  return db.insertInto('media').values(media).returningAll().executeTakeFirstOrThrow();
}

const ownedMedia = precompiled<[number, number], MediaRow>(2, (db, userId, id) =>
  db.selectFrom('media').selectAll().where('user_id', '=', userId).where('id', '=', id).where('deleted_at', 'is', null),
);

/** A live media item of one owner, e.g. to check a voicemail drop's `media_id` (every drop create: compiled once). */
export async function findOwnedMedia(db: Db, userId: number, id: number): Promise<MediaRow | undefined> {
  return (await ownedMedia(db, userId, id))[0];
}

/** A live media item with what the access rule needs to know about its owner. */
export function findMedia(db: Db, id: number) {
  return findOwnedRow(db, db.selectFrom('media').selectAll().where('id', '=', id).where('deleted_at', 'is', null));
}

/** One page of an owner's media, filtered by `MEDIA_FILTERS`. */
export function searchMedia(db: Db, userId: number, params: SearchParams) {
  const query = db.selectFrom('media').selectAll().where('user_id', '=', userId).where('deleted_at', 'is', null);
  return runSearch(query, MEDIA_FILTERS, params, 'id');
}

/** A public file URL's token: 192 random bits, base64url (media/ingest.ts). */
const TOKEN = /^[A-Za-z0-9_-]{32}$/;

/** The live item behind a public file URL; the token alone identifies it. */
export async function findMediaByToken(db: Db, token: string): Promise<MediaRow | undefined> {
  if (!TOKEN.test(token)) return undefined;
  return db
    .selectFrom('media')
    .innerJoin('users', 'users.id', 'media.user_id')
    .selectAll('media')
    .where('media.token', '=', token)
    .where('media.deleted_at', 'is', null)
    .where('users.deleted_at', 'is', null)
    .executeTakeFirst();
}

/** What keeps a media item from being deleted: the drops that will play it (voicemail/, a layer above, looks them up). */
export type MediaUsers = (mediaId: number) => Promise<{ id: number; name: string }[]>;

/**
 * Deletes a media item unless a drop that is Scheduled or Sending will play it (a 400 naming
 * them). The row stays, marked deleted: drops that used it still show it. The bytes go, as the
 * owner asked; `fileLeft` hears of a file that could not be removed.
 */
export async function deleteMedia(
  db: Db,
  storage: Pick<MediaStorage, 'delete'>,
  media: MediaRow,
  now: Date,
  usedBy: MediaUsers,
  fileLeft: (error: unknown) => void,
): Promise<void> {
  const users = await usedBy(media.id);
  if (users.length > 0) {
    const named = users.map((d) => `${d.id} (${JSON.stringify(d.name)})`).join(', ');
    throw new DomainError(
      'bad_request',
      `Media ${media.id} is the audio of voicemail drops that are Scheduled or Sending: ${named}. Cancel them or give them other audio first.`,
    );
  }
  const deleted = await softDeleteMedia(db, media.user_id, media.id, now);
  if (!deleted) throw notFound('Media', media.id);
  await storage.delete(deleted.storage_key).catch(fileLeft);
}

/** Marks an item deleted; returns undefined when it already was (a concurrent delete won). */
async function softDeleteMedia(db: Db, userId: number, id: number, at: Date): Promise<MediaRow | undefined> {
  return db
    .updateTable('media')
    .set({ deleted_at: at, updated_at: at })
    .where('user_id', '=', userId)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

/** A page of live media items in id order, after `afterId`: what `npm run media:move` copies. */
export async function liveMediaAfter(db: Db, afterId: number, limit: number): Promise<Pick<MediaRow, 'id' | 'storage_key' | 'size'>[]> {
  return db
    .selectFrom('media')
    .select(['id', 'storage_key', 'size'])
    .where('id', '>', afterId)
    .where('deleted_at', 'is', null)
    .orderBy('id')
    .limit(limit)
    .execute();
}
