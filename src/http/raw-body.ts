import type { App } from './fastify-types.ts';
import { HttpError } from './problems.ts';

/**
 * Provider webhooks are signed over the exact bytes they post, so their scopes read JSON bodies
 * raw and parse them only once the signature holds.
 */
export function readJsonRaw(app: App): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
}

/** The raw body of a `readJsonRaw` scope, parsed; malformed JSON is the poster's problem (400). */
export function parseRawJson(body: unknown): unknown {
  if (!Buffer.isBuffer(body)) throw new HttpError('unsupported_media_type', 'Post the body as JSON (application/json).');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new HttpError('bad_request', 'The body is not valid JSON.');
  }
}

/** A header's value, the first one if it was sent several times. */
export function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
