import { join } from 'node:path';
import multipart from '@fastify/multipart';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type Static, Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import type { MediaRow } from '../../db/schema.ts';
import { validationError } from '../../errors.ts';
import { type Principal, requireReachable } from '../../identity/access.ts';
import { Success, WritableBody } from '../../json-schema.ts';
import { AUDIO_COLLECTION } from '../../media/detect.ts';
import { mediaRejected } from '../../media/errors.ts';
import { type MediaIntake, prepareStaging } from '../../media/ingest.ts';
import {
  deleteMedia,
  findMedia,
  findMediaByToken,
  MEDIA_FILTERS,
  Media,
  readableSize,
  searchMedia,
  toApiMedia,
} from '../../media/media.ts';
import { openMediaStorage } from '../../media/storage.ts';
import type { MediaStorage } from '../../media/store.ts';
import { dropsPlayingMedia } from '../../messages/message-tables.ts';
import { parseRange } from '../byte-range.ts';
import type { App } from '../fastify-types.ts';
import { createFromUpload, createFromUrl, FORM_OVERHEAD_BYTES } from '../media-create.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { HttpError } from '../problems.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from '../schemas.ts';

const UrlBody = WritableBody(
  {
    full_url: Type.String({ minLength: 1, maxLength: 2048, description: 'http(s) address Hopper fetches the file from' }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    collection_name: Type.Optional(Type.String({ minLength: 1, maxLength: 64, default: AUDIO_COLLECTION })),
  },
  ['id', 'file_name', 'mime_type', 'size', 'readable_size', 'download_url', 'created_at', 'updated_at', 'deleted_at'],
);
Object.assign(UrlBody, { title: 'MediaFromUrl', examples: [{ full_url: 'https://files.example.com/open-house.wav', name: 'open-house' }] });
// Documentation only: the form is read part by part in the handler. Without `type`, the schema
// does not refuse the (absent) parsed body of a multipart request (the document adds it).
const UploadForm = Type.Unsafe({
  title: 'MediaUpload',
  properties: {
    file: Type.String({ format: 'binary', description: 'The file; its type is judged from its bytes' }),
    name: Type.String({ maxLength: 255, description: 'Defaults to the file name without extension' }),
    collection_name: Type.String({ maxLength: 64, default: AUDIO_COLLECTION }),
  },
  required: ['file'],
});

/** The types a stored file can have (media/detect.ts keeps no others): audio, and images for other collections. */
const FILE_TYPES = ['audio/wav', 'audio/mpeg', 'audio/mp4', 'audio/ogg', 'image/png', 'image/jpeg', 'image/gif', 'image/webp'];
/** Documentation of a file answer: 200 whole, 206 one range (Content-Range), in the file's own type. */
const fileResponses = (disposition: 'attachment' | 'inline') => {
  const content = Object.fromEntries(FILE_TYPES.map((type) => [type, { schema: Type.String({ format: 'binary' }) }]));
  const headers = {
    'Accept-Ranges': Type.String({ enum: ['bytes'], description: 'Range requests are supported (one range of bytes)' }),
    'Content-Length': Type.Integer({ minimum: 0, description: 'The bytes of this answer (on HEAD, those GET would send)' }),
    'Content-Disposition': Type.String({
      description: 'With the stored file name',
      examples: [`${disposition}; filename="open-house.wav"`],
    }),
  };
  return {
    200: { description: 'The whole file, in its type (audio/wav, audio/mpeg, …)', headers, content },
    206: {
      description: 'The bytes the Range header asked for',
      headers: {
        ...headers,
        'Content-Range': Type.String({ description: 'The bytes sent and the size of the file', examples: ['bytes 0-1023/96044'] }),
      },
      content,
    },
  };
};

const TOKEN = /^[A-Za-z0-9_-]{32}$/;

/**
 * Media: upload (multipart) or fetch-by-URL, search, read, delete, keyed download, and the public
 * file URL outside /v3 that voicemail providers fetch. Registered in a scope of its own so the
 * multipart parser exists for these routes only; every other route keeps answering 415 to forms.
 */
export async function mediaRoutes(app: App, { database: { db, requestDb }, config, clock }: AppContext): Promise<void> {
  const tags = ['Media'];
  const reachableMedia = async (principal: Principal, id: number) => requireReachable(principal, await findMedia(db, id), 'Media', id).row;
  const errors = problems(...AUTHENTICATED_ERRORS);
  const storage = await openMediaStorage(config, requestDb);
  const intake: MediaIntake = { db, clock, storage, stagingDir: join(config.dataDir, 'media-incoming'), maxBytes: config.mediaMaxBytes };
  await prepareStaging(intake.stagingDir);
  // One file and a few short fields. A second file part is let through so that it can be named in
  // the error; the size limit sits one byte above ours so that our own counter, which knows which
  // field to name, is the one that trips.
  await app.register(multipart, {
    limits: { files: 2, fields: 10, parts: 12, fieldSize: 4096, fieldNameSize: 100, fileSize: config.mediaMaxBytes + 1 },
  });

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
    async (request) => {
      return envelope(
        await searchMedia(db, request.owner.id, request.query),
        (row) => toApiMedia(row, config.publicUrl),
        request,
        config.publicUrl,
      );
    },
  );

  /** A multipart upload: refuses a body that cannot fit before reading any of it. */
  const upload = (request: FastifyRequest, userId: number): Promise<MediaRow> => {
    if (Number(request.headers['content-length']) > config.mediaMaxBytes + FORM_OVERHEAD_BYTES) {
      throw mediaRejected('too_large', 'file', `The file is larger than the limit of ${config.mediaMaxBytes} bytes.`);
    }
    return createFromUpload(request, intake, userId);
  };
  const created = (reply: FastifyReply, row: MediaRow) =>
    reply.code(201).header('Location', `${config.publicUrl}/v3/media/${row.id}`).send(toApiMedia(row, config.publicUrl));
  const sizeNote = `Files over ${readableSize(config.mediaMaxBytes)} are refused with 413.`;

  app.post(
    '/v3/users/:user_id/media/upload',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        operationId: 'uploadMedia',
        summary: 'Upload a file (multipart/form-data)',
        description: `The form's \`file\` part is the file; its type is judged from its bytes, and the \`${AUDIO_COLLECTION}\` collection (the default) takes audio only. ${sizeNote} One request type, so that client generators type it exactly; \`POST /users/{user_id}/media/import\` fetches a file from a URL instead.`,
        params: UserIdParams,
        body: { content: { 'multipart/form-data': { schema: UploadForm } } },
        response: { 201: Media, ...problems(...AUTHENTICATED_ERRORS, 413, 415) },
      },
    },
    async (request, reply) => {
      if (!request.isMultipart()) {
        throw new HttpError(
          'unsupported_media_type',
          'Send the file as multipart/form-data, in a part named file (to have Hopper fetch a URL, POST JSON with full_url to /media/import).',
        );
      }
      return created(reply, await upload(request, request.owner.id));
    },
  );

  app.post(
    '/v3/users/:user_id/media/import',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        operationId: 'importMedia',
        summary: 'Have Hopper fetch a file from a URL (JSON with full_url)',
        description: `Hopper downloads \`full_url\` (http or https) and stores it as an upload would be stored: the type is judged from the bytes, and the \`${AUDIO_COLLECTION}\` collection (the default) takes audio only. ${sizeNote}`,
        params: UserIdParams,
        body: { content: { 'application/json': { schema: UrlBody } } },
        response: { 201: Media, ...problems(...AUTHENTICATED_ERRORS, 413, 415) },
      },
    },
    async (request, reply) => {
      if (request.isMultipart()) {
        throw new HttpError(
          'unsupported_media_type',
          'Send JSON with full_url (Content-Type: application/json); to upload a file as multipart/form-data, POST it to /media/upload.',
        );
      }
      return created(reply, await createFromUrl(request.body as Static<typeof UrlBody>, intake, request.owner.id, config));
    },
  );

  app.post(
    '/v3/users/:user_id/media',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        operationId: 'createMedia',
        deprecated: true,
        summary: 'Upload a file (multipart/form-data) or have Hopper fetch one (JSON with full_url)',
        description: `Kept for existing clients; new code uses \`/media/upload\` or \`/media/import\`, which take one request type each. The type is judged from the bytes; the \`${AUDIO_COLLECTION}\` collection (the default) takes audio only. ${sizeNote}`,
        params: UserIdParams,
        body: { content: { 'multipart/form-data': { schema: UploadForm }, 'application/json': { schema: UrlBody } } },
        response: { 201: Media, ...problems(...AUTHENTICATED_ERRORS, 413, 415) },
      },
    },
    async (request, reply) => {
      const user = request.owner;
      let row: MediaRow;
      if (request.isMultipart()) {
        row = await upload(request, user.id);
      } else if (request.body === undefined) {
        throw validationError({ body: ['must be multipart/form-data with a file, or JSON with full_url'] });
      } else {
        row = await createFromUrl(request.body as Static<typeof UrlBody>, intake, user.id, config);
      }
      return created(reply, row);
    },
  );

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
      const media = TOKEN.test(token) ? await findMediaByToken(db, token) : undefined;
      if (!media || media.file_name !== file_name) throw new HttpError('not_found', 'There is no such media file, or it was deleted.');
      return sendFile(request, reply, storage, media, 'inline');
    },
  });
}

/** Sends a stored file, whole or one byte range of it; HEAD gets the same headers without reading it. */
async function sendFile(request: FastifyRequest, reply: FastifyReply, storage: MediaStorage, media: MediaRow, disposition: string) {
  // Without validators of our own, an If-Range condition can never be confirmed: send it all.
  const wanted = request.headers['if-range'] ? ({ kind: 'full' } as const) : parseRange(request.headers.range, media.size);
  if (wanted.kind === 'unsatisfiable') {
    throw new HttpError('range_not_satisfiable', `The range lies outside the file's ${media.size} bytes.`, {
      headers: { 'Content-Range': `bytes */${media.size}`, 'Accept-Ranges': 'bytes' },
    });
  }
  const range = wanted.kind === 'partial' ? wanted.range : undefined;
  let body: Awaited<ReturnType<MediaStorage['createReadStream']>> | undefined;
  try {
    if (request.method === 'HEAD') {
      if (!(await storage.stat(media.storage_key))) throw Object.assign(new Error('missing'), { code: 'ENOENT' });
    } else {
      body = await storage.createReadStream(media.storage_key, range);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    request.log.error({ mediaId: media.id, key: media.storage_key }, 'media file missing from storage');
    throw new HttpError('not_found', 'The file of this media item is missing.');
  }
  reply.code(range ? 206 : 200).headers({
    'Content-Type': media.mime_type,
    'Content-Length': String(range ? range.end - range.start + 1 : media.size),
    'Accept-Ranges': 'bytes',
    'Content-Disposition': `${disposition}; filename="${media.file_name}"`,
    'X-Content-Type-Options': 'nosniff',
    // Deleting must stop the file being served, so shared caches have to ask every time.
    'Cache-Control': disposition === 'inline' ? 'no-cache' : 'private, no-store',
  });
  if (range) reply.header('Content-Range', `bytes ${range.start}-${range.end}/${media.size}`);
  return reply.send(body);
}
