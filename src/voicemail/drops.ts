import { type Insertable, type SqlBool, sql } from 'kysely';
import { type Static, Type } from 'typebox';
import { NANP_PHONE_RULE, normalizeNanpPhone } from '../contacts/phone.ts';
import type { AppContext } from '../context.ts';
import type { Db } from '../db/database.ts';
import type { UserRef } from '../db/owned-rows.ts';
import { precompiled } from '../db/precompiled.ts';
import type { MediaRow, VoicemailDropRow, VoicemailDropsTable } from '../db/schema.ts';
import type { CountCache, Filters, SearchParams } from '../db/search.ts';
import { type FieldErrors, notFound, throwIfAny } from '../errors.ts';
import { Id, Nullable, StringEnum, Timestamp, WritableBody } from '../json-schema.ts';
import { findOwnedMedia, isAudioMedia, Media, toApiMedia } from '../media/media.ts';
import { MESSAGE_STATUSES, planSchedule, SEND_TYPES } from '../messages/lifecycle.ts';
import { changesAny, parseSendAt, Reporting, SendAtField, SendType, StatusField, StatusOut } from '../messages/message-fields.ts';
import { searchMessages } from '../messages/message-search.ts';
import { type MessageView, selectMessages, toMessageView } from '../messages/message-view.ts';
import { createMessage, deleteMessage, updateMessage } from '../messages/message-writes.ts';
import { RecipientList, RecipientOutput, resolveRecipientEntries } from '../messages/recipients.ts';
import { formatTimestamp } from '../time.ts';
import { PROVIDER_QUEUES, sendProviderJob } from './provider-jobs.ts';
import { configuredProviders, dropAudioType, MIN_DROP_SECONDS, VOICEMAIL_PROVIDERS } from './providers.ts';

/**
 * Voicemail drops (the specification's first resource): the API shape and bodies, the rules a
 * drop's fields follow, and every statement that reads or writes a drop. The routes are in
 * http/routes/voicemail-drops.ts; sending a drop is the engine's (sending/) with the voicemail
 * channel (voicemail-channel.ts).
 */

// ── Shapes ──────────────────────────────────────────────────────────────────────────────────

export const VoicemailDrop = Type.Object({
  id: Id,
  provider: Type.String(),
  media_id: Id,
  callback_number: Type.String({ description: '10 digits' }),
  name: Type.String(),
  description: Nullable(Type.String()),
  status: StatusOut,
  reason: Nullable(Type.String()),
  send_type: SendType,
  send_at: Nullable(Timestamp),
  sending_at: Nullable(Timestamp),
  sent_at: Nullable(Timestamp),
  recipients: Type.Array(RecipientOutput),
  reporting: Reporting,
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
  media: Media,
});

const fields = {
  provider: StringEnum(VOICEMAIL_PROVIDERS, { description: 'A provider configured on this server' }),
  media_id: Id,
  callback_number: Type.String({ maxLength: 32, description: 'Any common notation; stored as 10 digits' }),
  name: Type.String({ minLength: 1, maxLength: 255 }),
  description: Nullable(Type.String({ maxLength: 4096 })),
  status: StatusField,
  reason: Nullable(Type.String({ maxLength: 1024 })),
  send_type: SendType,
  send_at: SendAtField,
  recipients: RecipientList,
};
const READ_ONLY = ['id', 'sending_at', 'sent_at', 'reporting', 'created_at', 'updated_at', 'deleted_at', 'media'];
const { provider, media_id, callback_number, name, ...optional } = fields;
export const CreateDropBody = WritableBody(
  { provider, media_id, callback_number, name, ...Type.Partial(Type.Object(optional)).properties },
  READ_ONLY,
);
export const UpdateDropBody = WritableBody(Type.Partial(Type.Object(fields)).properties, READ_ONLY);
type DropBody = Static<typeof UpdateDropBody>;

const CONTENT_FIELDS = ['provider', 'media_id', 'callback_number', 'name', 'description', 'reason', 'recipients'] as const;

export const DROP_FILTERS: Filters = {
  id: { kind: 'id', column: 'msg.id' },
  provider: { kind: 'enum', column: 'msg.provider', values: VOICEMAIL_PROVIDERS },
  media_id: { kind: 'id', column: 'msg.media_id' },
  callback_number: { kind: 'exact', column: 'msg.callback_number' },
  name: { kind: 'text', column: 'msg.name' },
  description: { kind: 'text', column: 'msg.description' },
  status: { kind: 'enum', column: 'msg.status', values: MESSAGE_STATUSES },
  send_type: { kind: 'enum', column: 'msg.send_type', values: SEND_TYPES },
};

export type DropView = MessageView<VoicemailDropRow>;

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

// ── Rules ───────────────────────────────────────────────────────────────────────────────────

/**
 * Checks a create (`current` undefined) or a partial update against the owner's data and the
 * status rules, and returns the columns to write. One validation error reports every problem.
 */
async function dropChanges(
  ctx: AppContext,
  ownerId: number,
  body: DropBody,
  current: VoicemailDropRow | undefined,
  found: { media?: MediaRow } = {},
) {
  const { db } = ctx.database;
  const errors: FieldErrors = {};
  const changes: Partial<Insertable<VoicemailDropsTable>> = {};
  if (body.provider !== undefined) {
    const configured: string[] = configuredProviders(ctx.config);
    if (!configured.includes(body.provider))
      errors.provider = [`is not configured on this server; configured: ${configured.join(', ') || 'none'}`];
    else changes.provider = body.provider;
  }
  if (body.media_id !== undefined) {
    const media = await findOwnedMedia(db, ownerId, body.media_id);
    if (!media) errors.media_id = ["does not name one of the owner's media items"];
    else if (!isAudioMedia(media)) errors.media_id = [`must name an audio file (this one is ${media.mime_type})`];
    else if (!dropAudioType(media.mime_type))
      errors.media_id = [`must be WAV, MP3 or M4A audio, the formats providers play (this one is ${media.mime_type})`];
    else if (media.duration_seconds !== null && media.duration_seconds <= MIN_DROP_SECONDS) {
      errors.media_id = [
        `must be longer than ${MIN_DROP_SECONDS} seconds, as providers refuse shorter audio (this one is ${media.duration_seconds} s)`,
      ];
    } else {
      changes.media_id = media.id;
      found.media = media;
    }
  }
  if (body.callback_number !== undefined) {
    const digits = normalizeNanpPhone(body.callback_number);
    if (digits) changes.callback_number = digits;
    else errors.callback_number = [NANP_PHONE_RULE];
  }
  if (body.name !== undefined) {
    if (body.name.trim() === '') errors.name = ['must not be blank'];
    else changes.name = body.name.trim();
  }
  if (body.description !== undefined) changes.description = body.description;
  if (body.reason !== undefined) changes.reason = body.reason;
  if (body.recipients !== undefined) {
    const recipients = await resolveRecipientEntries(db, ownerId, 'recipients', body.recipients, errors);
    changes.recipients = JSON.stringify(recipients);
  }
  const comparable = { ...body, callback_number: changes.callback_number ?? body.callback_number };
  const otherChanges = current !== undefined && changesAny(current, comparable, CONTENT_FIELDS);
  const requested = { status: body.status, send_type: body.send_type, send_at: parseSendAt(body.send_at) };
  const schedule = planSchedule(current, requested, otherChanges, ctx.clock, errors);
  throwIfAny(errors);
  return { ...changes, ...schedule };
}

// ── Statements ──────────────────────────────────────────────────────────────────────────────

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

/** Drops with their embedded media item, in the one query of `selectMessages`. */
export function selectDrops(db: Db) {
  return selectMessages(db, 'voicemail_drop')
    .innerJoin('media as m', 'm.id', 'msg.media_id')
    .select(MEDIA_COLUMNS.map((column) => sql.ref(`m.${column}`).as(`m__${column}`)));
}

// The read of every GET, PUT and DELETE: compiled once, not per request.
const dropById = precompiled<[number], object>(1, (db, id) => selectDrops(db).where('msg.id', '=', id));

const dropsByIds = precompiled<[number[]], object>(1, (db, ids) => selectDrops(db).where(sql<SqlBool>`msg.id = any(${ids}::bigint[])`));

/** A live drop with its media, counters and owner; undefined when there is none or it was deleted. */
export async function findDrop(db: Db, id: number): Promise<DropView | undefined> {
  const [joined] = await dropById(db, id);
  return joined && toMessageView<VoicemailDropRow>(joined);
}

async function requireDrop(db: Db, id: number): Promise<DropView> {
  const view = await findDrop(db, id);
  if (!view) throw notFound('Voicemail drop', id);
  return view;
}

/** One page of an owner's drops, filtered by `DROP_FILTERS`. */
export async function searchDrops(db: Db, ownerId: number, params: SearchParams, totals: CountCache) {
  const live = db.selectFrom('voicemail_drops as msg').selectAll().where('msg.deleted_at', 'is', null);
  const result = await searchMessages(db, 'voicemail_drop', ownerId, live, params, DROP_FILTERS, (ids) => dropsByIds(db, ids), totals);
  return { ...result, rows: result.rows.map((joined) => toMessageView<VoicemailDropRow>(joined)) };
}

export async function createDrop(ctx: AppContext, owner: UserRef, body: Static<typeof CreateDropBody>): Promise<DropView> {
  const found: { media?: MediaRow } = {};
  const values = (await dropChanges(ctx, owner.id, body, undefined, found)) as Insertable<VoicemailDropsTable>;
  const insert = (db: Db) =>
    db
      .insertInto('voicemail_drops')
      .values({ ...values, user_id: owner.id })
      .returningAll()
      .executeTakeFirstOrThrow() as Promise<VoicemailDropRow>;
  // The media item was read (and checked) above: the new drop is returned without reading it back.
  return createMessage(ctx, 'voicemail_drop', owner, values, insert, { m: found.media as unknown as Record<string, unknown> });
}

/** Applies the fields present (DESIGN.md §4: partial update), under the status rules. */
export async function updateDrop(ctx: AppContext, view: DropView, body: DropBody): Promise<DropView> {
  const updated = await updateMessage(
    ctx,
    'voicemail_drop',
    view,
    (id) => requireDrop(ctx.database.db, id),
    (row) => dropChanges(ctx, row.user_id, body, row),
  );
  if (view.row.status === 'Sending' && updated.row.status === 'Cancelled') {
    // The provider may still hold drops handed over: a worker stops them (provider-work.ts).
    await sendProviderJob(ctx.queue.boss, PROVIDER_QUEUES.cancelled, { kind: 'voicemail_drop', id: updated.row.id }).catch(
      (error: unknown) =>
        // The cancel stands in Hopper; only the provider's stop is lost (logged like the queue's own errors).
        console.error('provider stop of a cancelled drop not queued', error),
    );
  }
  return updated;
}

/** Drops that will still play this media item (Scheduled or Sending), by id and name. */
export async function dropsUsingMedia(db: Db, mediaId: number): Promise<{ id: number; name: string }[]> {
  const rows = await db
    .selectFrom('voicemail_drops')
    .select(['id', 'name'])
    .where('media_id', '=', mediaId)
    .where('status', 'in', ['Scheduled', 'Sending'])
    .where('deleted_at', 'is', null)
    .orderBy('id')
    .limit(20)
    .execute();
  return rows.map((r) => ({ id: Number(r.id), name: r.name }));
}

export async function deleteDrop(ctx: AppContext, view: DropView): Promise<void> {
  await deleteMessage(ctx, 'voicemail_drop', view.row, (id) => requireDrop(ctx.database.db, id));
}
