import { join } from 'node:path';
import multipart from '@fastify/multipart';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { searchTags } from '../../contacts/tags.ts';
import type { MediaRow } from '../../db/schema.ts';
import { MAX_PER_PAGE } from '../../db/search.ts';
import { DomainError, validationError } from '../../errors.ts';
import type { App } from '../../http/fastify-types.ts';
import { checkBody } from '../../http/validation.ts';
import { requireReachable } from '../../identity/access.ts';
import { Id } from '../../json-schema.ts';
import { AUDIO_COLLECTION } from '../../media/detect.ts';
import { discard, type MediaIntake, type StagedFile, stage, store } from '../../media/ingest.ts';
import { findOwnedMedia, publicFileUrl } from '../../media/media.ts';
import { openMediaStorage } from '../../media/storage.ts';
import type { DropView } from '../../messages/message-tables.ts';
import { CreateDropBody, createDrop, UpdateDropBody, updateDrop } from '../../voicemail/drops.ts';
import { configuredProviders, MIN_DROP_SECONDS } from '../../voicemail/providers.ts';
import { CSRF_FIELD, tokensMatch } from '../csrf.ts';
import { emptyForm, type Form, submitForm } from '../forms.ts';
import { PAGE_SCHEMA, sendMessage, sendPage } from '../render.ts';
import { toSignIn, type Viewer } from '../viewer.ts';
import { type Action, contactOptions, entries, isEditable, localInput, NOTICES, recipientIds, scheduleOf } from './compose-fields.ts';
import { DROP_PAGES } from './message-kinds.ts';

/**
 * `/drops/new` and `/drops/{id}/edit`: a voicemail drop's fields with their labels, the audio as an
 * upload (multipart/form-data, stored as `POST /v3/users/{id}/media/upload` stores it) with a player
 * for the current one, the recipients as checkboxes, and the same buttons as an email's. The form is
 * multipart, so its CSRF token is checked here, as its first part, before the file is read
 * (`multipartForm` in index.ts). The drop is saved by `createDrop` / `updateDrop`, as the API's.
 */
const DROP_LABELS = {
  name: 'Name',
  description: 'Description',
  callback_number: 'Callback number',
  audio: 'Audio upload',
  media_id: 'Audio upload',
  provider: 'Provider',
  recipients: 'Recipients',
  send_at: 'Send at',
  status: 'Status',
} as const;
const TEXT = new Set(['name', 'description', 'callback_number', 'provider', 'media_id', 'send_at', 'contact_q', 'action']);
const LISTS = new Set(['recipients_tags', 'recipients_contacts']);

const EditParams = Type.Object({ id: Id });
const EditQuery = Type.Object({ done: Type.Optional(Type.String({ maxLength: 20 })) });

interface Posted {
  values: Record<string, string | string[]>;
  staged?: StagedFile;
  fileName?: string;
}

/**
 * Reads the multipart form: the CSRF token must be its first part (the hidden field is the form's
 * first), so a forged form is refused before its file is read; the file is staged as it arrives.
 */
async function readDropForm(request: FastifyRequest, intake: MediaIntake, csrf: string | undefined): Promise<Posted | null> {
  const posted: Posted = { values: { recipients_tags: [], recipients_contacts: [] } };
  let first = true;
  try {
    for await (const part of request.parts()) {
      if (first && (part.type === 'file' || part.fieldname !== CSRF_FIELD || !tokensMatch(part.value, csrf))) {
        if (part.type === 'file') part.file.resume();
        return null;
      }
      first = false;
      if (part.type === 'file') {
        if (part.fieldname !== 'audio' || posted.staged || !part.filename) part.file.resume();
        else {
          posted.fileName = part.filename;
          posted.staged = await stage(intake, part.file, 'audio');
        }
      } else if (typeof part.value === 'string' && TEXT.has(part.fieldname)) posted.values[part.fieldname] = part.value.trim();
      else if (typeof part.value === 'string' && LISTS.has(part.fieldname)) (posted.values[part.fieldname] as string[]).push(part.value);
    }
  } catch (error) {
    await discard(posted.staged);
    if (error instanceof DomainError) throw error;
    throw validationError({ audio: [`could not be read: ${(error as Error).message}`] });
  }
  // An empty form (no parts at all) has no token either.
  return first ? null : posted;
}

function dropValues(view: DropView | undefined, timeZone: string | null): Record<string, string | string[]> {
  if (!view) return { name: '', description: '', callback_number: '', provider: '', media_id: '', send_at: '' };
  const { row } = view;
  return {
    name: row.name,
    description: row.description ?? '',
    callback_number: row.callback_number,
    provider: row.provider,
    media_id: String(row.media_id),
    send_at: row.send_type === 'Future' && row.send_at ? localInput(row.send_at, timeZone) : '',
    ...recipientIds('recipients', row.recipients),
  };
}

/** The API's body for the action: a new drop's every field, an update's fields as the form has them. */
function dropBody(values: Record<string, string | string[]>, action: Action, timeZone: string | null, view: DropView | undefined) {
  const schedule = scheduleOf(action, String(values.send_at ?? ''), timeZone, view?.row.status);
  if (action === 'cancel') return schedule;
  const media = String(values.media_id ?? '');
  return {
    name: String(values.name ?? ''),
    description: String(values.description ?? '') || null,
    callback_number: String(values.callback_number ?? ''),
    provider: String(values.provider ?? ''),
    ...(/^\d{1,15}$/.test(media) ? { media_id: Number(media) } : {}),
    recipients: entries(values, 'recipients'),
    ...schedule,
  };
}

async function sendDropForm(
  reply: FastifyReply,
  ctx: AppContext,
  viewer: Viewer,
  o: { view?: DropView; form: Form; search?: string; notice?: string },
  status = 200,
) {
  const { db } = ctx.database;
  const { view, form } = o;
  const [tags, contacts] = await Promise.all([
    searchTags(db, viewer.owner.id, { per_page: MAX_PER_PAGE }),
    contactOptions(db, viewer.owner.id, form.values, o.search ?? ''),
  ]);
  const mediaId = Number(form.values.media_id);
  const media = Number.isSafeInteger(mediaId) && mediaId > 0 ? await findOwnedMedia(db, viewer.owner.id, mediaId) : undefined;
  return sendPage(
    reply,
    'compose/drop',
    {
      title: view ? `Edit “${view.row.name}”` : 'New voicemail drop',
      section: 'drops',
      session: viewer.session,
      form,
      view: view ?? null,
      editable: !view || isEditable(view.row.status),
      action: view ? `/drops/${view.row.id}/edit` : '/drops/new',
      timeZone: viewer.owner.time_zone ?? 'UTC',
      search: o.search ?? '',
      searched: Boolean(o.search),
      notice: o.notice ?? null,
      providers: configuredProviders(ctx.config),
      minSeconds: MIN_DROP_SECONDS,
      audio: media ? { src: publicFileUrl('', media), name: media.name } : null,
      tags: tags.rows.map((tag) => ({ value: String(tag.id), label: tag.name })),
      contacts,
    },
    status,
  );
}

/** Stores an uploaded file as the owner's audio; its refusal is the form's error under Audio upload. */
async function storeAudio(intake: MediaIntake, posted: Posted, ownerId: number): Promise<MediaRow | undefined> {
  if (!posted.staged) return undefined;
  return store(intake, posted.staged, {
    userId: ownerId,
    originalName: posted.fileName,
    name: undefined,
    collectionName: AUDIO_COLLECTION,
    field: 'audio',
  });
}

async function postDrop(
  request: FastifyRequest,
  reply: FastifyReply,
  ctx: AppContext,
  intake: MediaIntake,
  viewer: Viewer,
  view: DropView | undefined,
) {
  const posted = await readDropForm(request, intake, viewer.session.csrfToken);
  if (!posted) {
    return sendMessage(
      reply,
      403,
      { title: 'The form could not be accepted', text: 'It came without its security token. Reload the page and try again.' },
      viewer.session,
    );
  }
  const { values } = posted;
  const action = String(values.action) as Action;
  if (action === 'search') {
    await discard(posted.staged);
    return sendDropForm(reply, ctx, viewer, { view, form: emptyForm(values), search: String(values.contact_q) });
  }
  if (!['save', 'schedule', 'send', 'cancel'].includes(action)) {
    await discard(posted.staged);
    throw validationError({ action: ['must be one of the form’s buttons'] });
  }
  const outcome = await submitForm(values, DROP_LABELS, async () => {
    const media = await storeAudio(intake, posted, viewer.owner.id);
    // Kept on a refused form: the file stays uploaded, with its player, and is not sent again.
    if (media) values.media_id = String(media.id);
    const body = dropBody(values, action, viewer.owner.time_zone, view);
    checkBody(view ? UpdateDropBody : CreateDropBody, body);
    // The schema has just checked the provider's name.
    return view ? updateDrop(ctx, view, body as never) : createDrop(ctx, viewer.owner, body as never);
  });
  if (!outcome.ok) return sendDropForm(reply, ctx, viewer, { view, form: outcome.form }, 422);
  const id = outcome.result.row.id;
  return reply.redirect(action === 'save' ? `/drops/${id}/edit?done=saved` : `/drops/${id}?done=${action}`, 303);
}

export async function dropComposePages(web: App, ctx: AppContext): Promise<void> {
  const { db } = ctx.database;
  const { config } = ctx;
  const intake: MediaIntake = {
    db,
    clock: ctx.clock,
    storage: await openMediaStorage(config, ctx.database.requestDb),
    stagingDir: join(config.dataDir, 'media-incoming'),
    maxBytes: config.mediaMaxBytes,
  };
  const found = async (viewer: Viewer, id: number) =>
    requireReachable(viewer.principal, await DROP_PAGES.find(db, id), 'Voicemail drop', id);

  web.get('/drops/new', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    return sendDropForm(reply, ctx, viewer, { form: emptyForm(dropValues(undefined, null)) });
  });
  web.get('/drops/:id/edit', { schema: { ...PAGE_SCHEMA, params: EditParams, querystring: EditQuery } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const view = await found(viewer, request.params.id);
    const form = emptyForm(dropValues(view, viewer.owner.time_zone));
    return sendDropForm(reply, ctx, viewer, { view, form, notice: NOTICES[request.query.done ?? ''] });
  });

  // The posts are multipart: the parser lives in a scope of their own, as the API's media routes have it.
  await web.register(async (scope: App) => {
    await scope.register(multipart, {
      limits: { files: 1, fields: 2100, parts: 2101, fieldSize: 4096, fieldNameSize: 100, fileSize: config.mediaMaxBytes + 1 },
    });
    const multipartForm = { multipartForm: true };
    scope.post('/drops/new', { schema: PAGE_SCHEMA, config: multipartForm }, async (request, reply) => {
      const viewer = request.viewer;
      if (!viewer) return toSignIn(request, reply);
      return postDrop(request, reply, ctx, intake, viewer, undefined);
    });
    scope.post('/drops/:id/edit', { schema: { ...PAGE_SCHEMA, params: EditParams }, config: multipartForm }, async (request, reply) => {
      const viewer = request.viewer;
      if (!viewer) return toSignIn(request, reply);
      return postDrop(request, reply, ctx, intake, viewer, await found(viewer, request.params.id));
    });
  });
}
