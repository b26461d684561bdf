import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { MediaRow } from '../db/schema.ts';
import { STORED_TYPES } from '../media/detect.ts';
import type { MediaStorage } from '../media/store.ts';
import { parseRange } from './byte-range.ts';
import { HttpError } from './problems.ts';

/** Documentation of a file answer: 200 whole, 206 one range (Content-Range), in the file's own type. */
export function fileResponses(disposition: 'attachment' | 'inline') {
  const content = Object.fromEntries(STORED_TYPES.map((type) => [type, { schema: Type.String({ format: 'binary' }) }]));
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
}

/** Sends a stored file, whole or one byte range of it; HEAD gets the same headers without reading it. */
export async function sendFile(
  request: FastifyRequest,
  reply: FastifyReply,
  storage: MediaStorage,
  media: MediaRow,
  disposition: 'attachment' | 'inline',
) {
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
