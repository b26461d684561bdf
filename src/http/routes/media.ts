import { join } from 'node:path';
import multipart from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { type Static, Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import type { MediaRow } from '../../db/schema.ts';
import { validationError } from '../../errors.ts';
import { type Principal, requireReachable } from '../../identity/access.ts';
import { Success } from '../../json-schema.ts';
import { AUDIO_COLLECTION } from '../../media/detect.ts';
import { importFromUrl, type MediaIntake, prepareStaging } from '../../media/ingest.ts';
import {
  deleteMedia,
  findMedia,
  findMediaByToken,
  MEDIA_FILTERS,
  Media,
  MediaFromUrl,
  MediaUpload,
  readableSize,
  searchMedia,
  toApiMedia,
} from '../../media/media.ts';
import { openMediaStorage } from '../../media/storage.ts';
import type { MediaStorage } from '../../media/store.ts';
import { dropsPlayingMedia } from '../../messages/message-tables.ts';
import { created } from '../created.ts';
import type { App } from '../fastify-types.ts';
import { fileResponses, sendFile } from '../media-files.ts';
import { createFromUpload, requireJson, requireMultipart } from '../media-form.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { HttpError } from '../problems.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from '../schemas.ts';

const tags = ['Media'];
const errors = problems(...AUTHENTICATED_ERRORS);
const uploadForm = { 'multipart/form-data': { schema: MediaUpload } };
const urlJson = { 'application/json': { schema: MediaFromUrl } };

/**
 * Media: upload (multipart) or fetch-by-URL, search, read, delete, keyed download, and the public
 * file URL outside /v3 that voicemail providers fetch. Registered in a scope of its own so the
 * multipart parser exists for these routes only; every other route keeps answering 415 to forms.
 */
export async function mediaRoutes(app: App, ctx: AppContext): Promise<void> {
  const { config } = ctx;
  const storage = await openMediaStorage(config, ctx.database.requestDb);
  const intake: MediaIntake = {
    db: ctx.database.db,
    clock: ctx.clock,
    storage,
    stagingDir: join(config.dataDir, 'media-incoming'),
    maxBytes: config.mediaMaxBytes,
  };
  await prepareStaging(intake.stagingDir);
  // One file and a few short fields. A second file part is let through so that it can be named in
  // the error; the size limit sits one byte above ours so that our own counter, which knows which
  // field to name, is the one that trips.
  await app.register(multipart, {
    limits: { files: 2, fields: 10, parts: 12, fieldSize: 4096, fieldNameSize: 100, fileSize: config.mediaMaxBytes + 1 },
  });
  searchAndCreateRoutes(app, ctx, intake);
  itemRoutes(app, ctx, storage);
}

/** A user's media: the search, and the three ways to add an item. */
function searchAndCreateRoutes(app: App, { database: { db }, config }: AppContext, intake: MediaIntake): void {
  app.get(
    '/v3/users/:user_id/media',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: "Search a user's media",
        params: UserIdParams,
        querystring: searchQuery(MEDIA_FILTERS),
        response: { 200: envelopeSchema(Media), ...errors },
      },
    },
    async (request) =>
      envelope(
        await searchMedia(db, request.owner.id, request.query),
        (row) => toApiMedia(row, config.publicUrl),
        request,
        config.publicUrl,
      ),
  );

  const sizeNote = `Files over ${readableSize(config.mediaMaxBytes)} are refused with 413.`;
  const fromUrl = (request: FastifyRequest) => importFromUrl(intake, request.owner.id, request.body as Static<typeof MediaFromUrl>, config);
  /** A route that adds an item, answered 201 with it and its Location. */
  const create = (url: string, schema: Record<string, unknown>, make: (request: FastifyRequest) => Promise<MediaRow>) =>
    app.post(
      url,
      {
        config: { owner: 'user_id' },
        schema: { tags, ...schema, params: UserIdParams, response: { 201: Media, ...problems(...AUTHENTICATED_ERRORS, 413, 415) } },
      },
      async (request, reply) => {
        const row = await make(request);
        return created(reply, `${config.publicUrl}/v3/media/${row.id}`, toApiMedia(row, config.publicUrl));
      },
    );

  create(
    '/v3/users/:user_id/media/upload',
    {
      operationId: 'uploadMedia',
      summary: 'Upload a file (multipart/form-data)',
      description: `The form's \`file\` part is the file; its type is judged from its bytes, and the \`${AUDIO_COLLECTION}\` collection (the default) takes audio only. ${sizeNote} One request type, so that client generators type it exactly; \`POST /users/{user_id}/media/import\` fetches a file from a URL instead.`,
      body: { content: uploadForm },
    },
    (request) => {
      requireMultipart(request);
      return createFromUpload(request, intake, request.owner.id);
    },
  );
  create(
    '/v3/users/:user_id/media/import',
    {
      operationId: 'importMedia',
      summary: 'Have Hopper fetch a file from a URL (JSON with full_url)',
      description: `Hopper downloads \`full_url\` (http or https) and stores it as an upload would be stored: the type is judged from the bytes, and the \`${AUDIO_COLLECTION}\` collection (the default) takes audio only. ${sizeNote}`,
      body: { content: urlJson },
    },
    (request) => {
      requireJson(request);
      return fromUrl(request);
    },
  );
  create(
    '/v3/users/:user_id/media',
    {
      operationId: 'createMedia',
      deprecated: true,
      summary: 'Upload a file (multipart/form-data) or have Hopper fetch one (JSON with full_url)',
      description: `Kept for existing clients; new code uses \`/media/upload\` or \`/media/import\`, which take one request type each. The type is judged from the bytes; the \`${AUDIO_COLLECTION}\` collection (the default) takes audio only. ${sizeNote}`,
      body: { content: { ...uploadForm, ...urlJson } },
    },
    (request) => {
      if (request.isMultipart()) return createFromUpload(request, intake, request.owner.id);
      if (request.body === undefined) throw validationError({ body: ['must be multipart/form-data with a file, or JSON with full_url'] });
      return fromUrl(request);
    },
  );
}

/** One item: read, delete, its download, and the public file URL. */
function itemRoutes(app: App, { database: { db }, config, clock }: AppContext, storage: MediaStorage): void {
  const reachableMedia = async (principal: Principal, id: number) => requireReachable(principal, await findMedia(db, id), 'Media', id).row;

  app.get(
    '/v3/media/:id',
    { schema: { tags, summary: 'Read a media item', params: IdParams, response: { 200: Media, ...errors } } },
    async (request) => toApiMedia(await reachableMedia(request.principal, request.params.id), config.publicUrl),
  );

  app.delete(
    '/v3/media/:id',
    {
      schema: {
        tags,
        summary: 'Delete a media item: its public URL stops serving at once',
        params: IdParams,
        response: { 200: Success, ...errors },
      },
    },
    async (request) => {
      const media = await reachableMedia(request.principal, request.params.id);
      await deleteMedia(
        db,
        storage,
        media,
        clock(),
        (id) => dropsPlayingMedia(db, id),
        (error) => request.log.error({ err: error, mediaId: media.id }, 'media file not removed'),
      );
      return { success: true };
    },
  );

  app.route({
    method: ['GET', 'HEAD'],
    url: '/v3/media/:id/download',
    schema: {
      tags,
      summary: 'Download the file as an attachment (Range requests supported)',
      params: IdParams,
      response: { ...fileResponses('attachment'), ...problems(...AUTHENTICATED_ERRORS, 416) },
    },
    handler: async (request, reply) => {
      const media = await reachableMedia(request.principal, (request.params as { id: number }).id);
      return sendFile(request, reply, storage, media, 'attachment');
    },
  });

  app.route({
    method: ['GET', 'HEAD'],
    url: '/media/:token/:file_name',
    config: { public: true },
    schema: {
      tags,
      operationId: 'getPublicFile',
      summary: 'The public file behind full_url (no key; Range requests supported)',
      security: [],
      params: Type.Object({ token: Type.String(), file_name: Type.String() }),
      response: { ...fileResponses('inline'), ...problems(404, 416) },
    },
    handler: async (request, reply) => {
      const { token, file_name } = request.params as { token: string; file_name: string };
      const media = await findMediaByToken(db, token);
      if (!media || media.file_name !== file_name) throw new HttpError('not_found', 'There is no such media file, or it was deleted.');
      return sendFile(request, reply, storage, media, 'inline');
    },
  });
}
