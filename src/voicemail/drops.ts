import type { Insertable } from 'kysely';
import { type Static, Type } from 'typebox';
import type { AppContext } from '../app-context.ts';
import { NANP_PHONE_RULE, normalizeNanpPhone } from '../contacts/phone.ts';
import type { Db } from '../db/database.ts';
import type { UserRef } from '../db/owned-rows.ts';
import type { MediaRow, VoicemailDropRow, VoicemailDropsTable } from '../db/schema.ts';
import type { CountCache, Filters, SearchParams } from '../db/search.ts';
import { type FieldErrors, notFound, throwIfAny, validationError } from '../errors.ts';
import { Id, Nullable, StringEnum, Timestamp, WritableBody } from '../json-schema.ts';
import { findOwnedMedia, isAudioMedia, Media, toApiMedia } from '../media/media.ts';
import { MESSAGE_STATUSES, planSchedule, SEND_TYPES } from '../messages/lifecycle.ts';
import {
  CorrelationFields,
  changesAny,
  correlationChanges,
  ExternalIdOut,
  MetadataOut,
  parseSendAt,
  Reporting,
  SendAtField,
  SendType,
  StatusField,
  StatusOut,
} from '../messages/message-fields.ts';
import { type DropView, findDrop, insertDrop, insertDropPlaying, pageOfDrops } from '../messages/message-tables.ts';
import { createMessage, deleteMessage, externalIdTaken, updateMessage } from '../messages/message-writes.ts';
import { RecipientList, RecipientOutput, resolveRecipientEntries } from '../messages/recipients.ts';
import { formatTimestamp } from '../time.ts';
import { PROVIDER_QUEUES, sendProviderJob } from './provider-queues.ts';
import { configuredProviders, DROP_AUDIO_MIME_TYPES, dropAudioType, MIN_DROP_SECONDS, VOICEMAIL_PROVIDERS } from './providers.ts';

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
  external_id: ExternalIdOut,
  metadata: MetadataOut,
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
  reason: Nullable(
    Type.String({
      maxLength: 1024,
      description:
        'An explanation attached to the status. Writable, as the specification lists it among the body parameters; Hopper sets it itself when a drop fails or is held (and clears it when it goes on).',
    }),
  ),
  send_type: SendType,
  send_at: SendAtField,
  recipients: RecipientList,
  ...CorrelationFields,
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
  external_id: { kind: 'exact', column: 'msg.external_id' },
};

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
    external_id: row.external_id ?? null,
    metadata: row.metadata ?? {},
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatTimestamp(row.deleted_at),
    media: toApiMedia(view.media, publicUrl),
  };
}

// ── Rules ───────────────────────────────────────────────────────────────────────────────────

/**
 * Checks a create (`current` undefined) or a partial update against the owner's data and the
 * status rules, and returns the columns to write. One validation error reports every problem.
 * With `mediaAtInsert` (a create), the media item is checked by the insert itself when every
 * other field is valid (createDrop): one round trip fewer; a body refused anyway still has its
 * media item checked here, so that its answer names every problem.
 */
async function dropChanges(ctx: AppContext, ownerId: number, body: DropBody, current: VoicemailDropRow | undefined, mediaAtInsert = false) {
  const { db } = ctx.database;
  let errors: FieldErrors = {};
  const changes: Partial<Insertable<VoicemailDropsTable>> = {};
  if (body.provider !== undefined) {
    const configured: string[] = configuredProviders(ctx.config);
    if (!configured.includes(body.provider))
      errors.provider = [`is not configured on this server; configured: ${configured.join(', ') || 'none'}`];
    else changes.provider = body.provider;
  }
  if (body.media_id !== undefined && mediaAtInsert) changes.media_id = body.media_id;
  else if (body.media_id !== undefined) {
    const problem = mediaProblem(await findOwnedMedia(db, ownerId, body.media_id));
    if (problem) errors.media_id = [problem];
    else changes.media_id = body.media_id;
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
  Object.assign(changes, correlationChanges(body, errors));
  const comparable = { ...body, callback_number: changes.callback_number ?? body.callback_number };
  const otherChanges = current !== undefined && changesAny(current, comparable, CONTENT_FIELDS);
  const requested = { status: body.status, send_type: body.send_type, send_at: parseSendAt(body.send_at) };
  const schedule = planSchedule(current, requested, otherChanges, ctx.clock, errors);
  if (mediaAtInsert && body.media_id !== undefined && Object.keys(errors).length > 0) {
    const problem = mediaProblem(await findOwnedMedia(db, ownerId, body.media_id));
    // In its place among the fields, after the provider.
    const { provider, ...rest } = errors;
    if (problem) errors = { ...(provider ? { provider } : {}), media_id: [problem], ...rest };
  }
  throwIfAny(errors);
  return { values: { ...changes, ...schedule } };
}

/** Why a media item cannot be a drop's audio (not the owner's live item, not audio a provider plays, too short), or undefined. */
function mediaProblem(named: MediaRow | undefined): string | undefined {
  if (!named) return "does not name one of the owner's media items";
  if (!isAudioMedia(named)) return `must name an audio file (media ${named.id} is ${named.mime_type})`;
  if (!dropAudioType(named.mime_type)) {
    return `must name WAV, MP3 or M4A audio, the formats providers play (media ${named.id} is ${named.mime_type})`;
  }
  if (named.duration_seconds !== null && named.duration_seconds <= MIN_DROP_SECONDS) {
    return `must name audio longer than ${MIN_DROP_SECONDS} seconds, as providers refuse shorter audio (media ${named.id} is ${named.duration_seconds} s long)`;
  }
  return undefined;
}

// ── Statements ──────────────────────────────────────────────────────────────────────────────

async function requireDrop(db: Db, id: number): Promise<DropView> {
  const view = await findDrop(db, id);
  if (!view) throw notFound('Voicemail drop', id);
  return view;
}

/** One page of an owner's drops, filtered by `DROP_FILTERS`. */
export function searchDrops(db: Db, ownerId: number, params: SearchParams, totals: CountCache) {
  return pageOfDrops(db, ownerId, params, DROP_FILTERS, totals);
}

export async function createDrop(ctx: AppContext, owner: UserRef, body: Static<typeof CreateDropBody>): Promise<DropView> {
  const { values } = await dropChanges(ctx, owner.id, body, undefined, true);
  const now = ctx.clock();
  const row = { ...values, user_id: owner.id, created_at: now, updated_at: now } as Insertable<VoicemailDropsTable>;
  // The media item is checked by the insert (mediaProblem's rules as a condition), and read with it.
  const playable = { mediaId: body.media_id, ownerId: owner.id, mimeTypes: DROP_AUDIO_MIME_TYPES, minSeconds: MIN_DROP_SECONDS };
  let media: MediaRow | undefined;
  const created = await externalIdTaken(ctx, 'voicemail_drop', owner.id, values.external_id, () =>
    createMessage(ctx, 'voicemail_drop', owner, values, async (db) => {
      const inserted = await insertDropPlaying(db, row, playable);
      media = inserted.media;
      if (inserted.drop) return inserted.drop;
      const problem = mediaProblem(inserted.media);
      if (problem) throw validationError({ media_id: [problem] });
      // The condition refused an item the rules take (it never should): the rules decide.
      return await insertDrop(db, row);
    }),
  );
  return { ...created, media: media as MediaRow };
}

/** Applies the fields present (README, "API conventions": PUT is a partial update), under the status rules. */
export async function updateDrop(ctx: AppContext, view: DropView, body: DropBody): Promise<DropView> {
  const updated = await externalIdTaken(ctx, 'voicemail_drop', view.row.user_id, body.external_id, () =>
    updateMessage(
      ctx,
      'voicemail_drop',
      view,
      (id) => requireDrop(ctx.database.db, id),
      async (row) => (await dropChanges(ctx, row.user_id, body, row)).values,
    ),
  );
  if (view.row.status === 'Sending' && updated.row.status === 'Cancelled') {
    // The provider may still hold drops handed over: a worker stops them (provider-job-handlers.ts).
    await sendProviderJob(ctx.queue.boss, PROVIDER_QUEUES.cancelled, { kind: 'voicemail_drop', id: updated.row.id }).catch(
      (error: unknown) =>
        // The cancel stands in Hopper; only the provider's stop is lost (logged like the queue's own errors).
        console.error('provider stop of a cancelled drop not queued', error),
    );
  }
  return updated;
}

export async function deleteDrop(ctx: AppContext, view: DropView): Promise<void> {
  await deleteMessage(ctx, 'voicemail_drop', view.row, (id) => requireDrop(ctx.database.db, id));
}
