import { Type } from 'typebox';
import type { App, AppContext } from '../../app.ts';
import { NANP_PHONE_RULE, normalizeNanpPhone } from '../../contacts/phone.ts';
import type { VoicemailDropRow } from '../../db/schema.ts';
import { findOwnedMedia, isAudioMedia } from '../../media/media.ts';
import { MESSAGE_STATUSES, planSchedule, SEND_TYPES, type SendType as SendTypeValue } from '../../messaging/lifecycle.ts';
import { type RecipientGroup, RecipientList, RecipientOutput, resolveRecipientEntries } from '../../messaging/recipients.ts';
import { configuredProviders, dropAudioType, MIN_DROP_SECONDS, VOICEMAIL_PROVIDERS } from '../../voicemail/providers.ts';
import { findDrop, findDropRows, toApiVoicemailDrop } from '../../voicemail/voicemail-drops.ts';
import { changesAny, parseSendAt, Reporting, SendAtField, SendType, StatusField, StatusOut } from '../message-fields.ts';
import { registerMessageRoutes } from '../message-routes.ts';
import { type FieldErrors, validationError } from '../problems.ts';
import { Id, Nullable, StringEnum, Timestamp, WritableBody } from '../schemas.ts';
import type { Filters } from '../search.ts';
import { Media } from './media.ts';

const VoicemailDrop = Type.Object({
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
interface DropBody {
  provider?: string;
  media_id?: number;
  callback_number?: string;
  name?: string;
  description?: string | null;
  status?: string;
  reason?: string | null;
  send_type?: SendTypeValue;
  send_at?: string | null;
  recipients?: { group: RecipientGroup; value: number; label?: string }[];
}
const READ_ONLY = ['id', 'sending_at', 'sent_at', 'reporting', 'created_at', 'updated_at', 'deleted_at', 'media'];
const { provider, media_id, callback_number, name, ...optional } = fields;
const CONTENT_FIELDS = ['provider', 'media_id', 'callback_number', 'name', 'description', 'reason', 'recipients'] as const;

const FILTERS: Filters = {
  id: { kind: 'id', column: 'msg.id' },
  provider: { kind: 'enum', column: 'msg.provider', values: VOICEMAIL_PROVIDERS },
  media_id: { kind: 'id', column: 'msg.media_id' },
  callback_number: { kind: 'exact', column: 'msg.callback_number' },
  name: { kind: 'text', column: 'msg.name' },
  description: { kind: 'text', column: 'msg.description' },
  status: { kind: 'enum', column: 'msg.status', values: MESSAGE_STATUSES },
  send_type: { kind: 'enum', column: 'msg.send_type', values: SEND_TYPES },
};

/** Checks a drop's fields against its owner's data and the status rules; one 400 reports every problem. */
async function dropChanges(ctx: AppContext, ownerId: number, input: Record<string, unknown>, current: VoicemailDropRow | undefined) {
  const body = input as DropBody;
  const { db } = ctx.database;
  const errors: FieldErrors = {};
  const changes: Record<string, unknown> = {};
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
    } else changes.media_id = media.id;
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
  if (Object.keys(errors).length > 0) throw validationError(errors);
  return { ...changes, ...schedule };
}

/** The specification's voicemail drop endpoints: search, create, read, update, delete. */
export async function voicemailDropRoutes(app: App, ctx: AppContext): Promise<void> {
  await registerMessageRoutes<VoicemailDropRow>(app, ctx, {
    kind: 'voicemail_drop',
    collection: 'voicemail_drops',
    label: 'Voicemail drop',
    tag: 'Voicemail drops',
    schema: VoicemailDrop,
    createBody: WritableBody({ provider, media_id, callback_number, name, ...Type.Partial(Type.Object(optional)).properties }, READ_ONLY),
    updateBody: WritableBody(Type.Partial(Type.Object(fields)).properties, READ_ONLY),
    filters: FILTERS,
    rowsByIds: (c, ids) => findDropRows(c.database.db, ids),
    find: (c, id) => findDrop(c.database.db, id),
    toApi: (view, c) => toApiVoicemailDrop(view, c.config.publicUrl),
    changes: dropChanges,
  });
}
