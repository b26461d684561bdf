import { jsonTextProblem } from '../json-text.ts';
import type { App } from './fastify-types.ts';
import { HttpError } from './problems.ts';

/**
 * Request bodies are JSON (routes that take forms or files register their own parsers). An empty
 * body with `Content-Type: application/json` means "no body" (a bodiless POST from
 * `curl -H 'Content-Type: application/json'`); anything else must parse, and may hold neither NUL
 * nor a lone UTF-16 surrogate, nor be nested deeper than any body of the API (json-text.ts).
 */
export function registerJsonBodies(app: App): void {
  // Without the text parser Fastify would hand plain text to the handlers.
  app.removeContentTypeParser('text/plain');
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    parseJson(request, body as string, (error, value) => {
      // What PostgreSQL cannot store is refused here, rather than failing in the database.
      const problem = error ? undefined : jsonTextProblem(value);
      if (problem) return done(new HttpError('bad_request', problem), undefined);
      done(error, value);
    });
  });
}
