import { Type } from 'typebox';
import { ContactBody } from '../../contacts/contacts.ts';
import { ImportResult, importContacts, MAX_IMPORT_BYTES, readCsv, readJsonLines } from '../../contacts/import.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { HttpError } from '../problems.ts';
import { AUTHENTICATED_ERRORS, problems, UserIdParams } from '../schemas.ts';
import { toValidationError, validatorCompiler } from '../validation.ts';

const CSV = 'text/csv';
const JSON_LINES = 'application/x-ndjson';

/** Bulk contact import (contacts/import.ts): the file is the body, CSV or JSON lines, up to 20 MB. */
export const contactImportRoutes: RoutePlugin = async (app, { database: { db }, clock }) => {
  // Only this scope reads these media types, as text.
  app.addContentTypeParser([CSV, JSON_LINES], { parseAs: 'string', bodyLimit: MAX_IMPORT_BYTES }, (_request, body, done) =>
    done(null, body),
  );
  const validate = validatorCompiler({ schema: ContactBody, httpPart: 'body', method: 'POST', url: '' }) as ((body: unknown) => boolean) & {
    errors?: Parameters<typeof toValidationError>[0] | null;
  };
  const check = (body: Record<string, unknown>) =>
    validate(body) ? undefined : toValidationError(validate.errors ?? [], undefined).errors;

  app.post(
    '/users/:user_id/contacts/import',
    {
      config: { owner: 'user_id' },
      bodyLimit: MAX_IMPORT_BYTES,
      schema: {
        tags: ['Contacts'],
        summary: 'Import contacts from CSV or JSON lines (up to 50,000 rows or 20 MB)',
        description:
          'The body is the file: `text/csv` with a header row naming the fields (first_name, last_name, email, phone, ' +
          'time_zone, status, tags; tags separated by `;`), or `application/x-ndjson` with one contact body a line. ' +
          'A row whose email (any case), or without an email whose phone, matches a live contact updates it: the non-empty ' +
          'cells are written and its tags are added to. Other rows are created. Invalid rows are refused with their line ' +
          'and the reasons, the others imported, in batches that each commit whole. Importing the same file again creates nothing.',
        params: UserIdParams,
        querystring: Type.Object(
          { tag: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\u0000]*$' }), { maxItems: 20 })) },
          { additionalProperties: false },
        ),
        body: { content: { [CSV]: { schema: Type.String() }, [JSON_LINES]: { schema: Type.String() } } },
        response: { 200: ImportResult, ...problems(...AUTHENTICATED_ERRORS, 413, 415) },
      },
    },
    async (request) => {
      const type = String(request.headers['content-type'] ?? '')
        .split(';')[0]
        ?.trim();
      if (typeof request.body !== 'string' || (type !== CSV && type !== JSON_LINES)) {
        throw new HttpError('unsupported_media_type', `Send the file as ${CSV} (with a header row) or ${JSON_LINES}.`);
      }
      const rows = type === CSV ? readCsv(request.body) : readJsonLines(request.body);
      const query = request.query as { tag?: string[] };
      return importContacts(db, request.owner.id, rows, check, query.tag ?? [], clock());
    },
  );
};
