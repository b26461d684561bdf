import type { App } from './fastify-types.ts';
import { HttpError } from './problems.ts';

/**
 * Request bodies are JSON (routes that take forms or files register their own parsers). An empty
 * body with `Content-Type: application/json` means "no body" (a bodiless POST from
 * `curl -H 'Content-Type: application/json'`); anything else must parse, and may not hold NUL.
 */
export function registerJsonBodies(app: App): void {
  // Without the text parser Fastify would hand plain text to the handlers.
  app.removeContentTypeParser('text/plain');
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    parseJson(request, body as string, (error, value) => {
      // PostgreSQL text cannot hold NUL: refuse it here rather than fail in the database.
      if (!error && hasNul(value))
        return done(new HttpError('bad_request', 'Strings must not contain NUL (\\u0000) characters.'), undefined);
      done(error, value);
    });
  });
}

function hasNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (Array.isArray(value)) return value.some(hasNul);
  if (value && typeof value === 'object') return Object.entries(value).some(([k, v]) => k.includes('\u0000') || hasNul(v));
  return false;
}
