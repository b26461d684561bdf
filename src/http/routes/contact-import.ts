import { Type } from 'typebox';
import { ContactBody } from '../../contacts/contacts.ts';
import { knownCharset, readMapping, readText } from '../../contacts/csv-file.ts';
import { ImportResult, importContacts, MAX_IMPORT_BYTES, readCsv, readJsonLines } from '../../contacts/import.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { HttpError } from '../problems.ts';
import { AUTHENTICATED_ERRORS, problems, UserIdParams } from '../schemas.ts';
import { bodyErrors, validatorCompiler } from '../validation.ts';

const CSV = 'text/csv';
const JSON_LINES = 'application/x-ndjson';
/** What this endpoint reads, and how it says so to a request with another Content-Type. */
const ACCEPTED = [CSV, 'application/csv', 'text/tab-separated-values', JSON_LINES];
const ACCEPTS =
  'This endpoint takes the file itself as the body: text/csv (a header row naming the columns, then a contact a row; ' +
  `also ${ACCEPTED.slice(1, 3).join(', ')}) or ${JSON_LINES} (a contact body a line), e.g. ` +
  "curl -H 'Content-Type: text/csv' --data-binary @contacts.csv";

/** Bulk contact import (contacts/import.ts): the file is the body, CSV or JSON lines, up to 20 MB. */
export const contactImportRoutes: RoutePlugin = async (app, { database: { db, oneConnection }, clock }) => {
  // Only this scope reads these media types, as bytes (their encoding is found in contacts/csv-file.ts);
  // any other, JSON included, reaches the handler to be told what this endpoint takes.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(ACCEPTED, { parseAs: 'buffer', bodyLimit: MAX_IMPORT_BYTES }, (_request, body, done) => done(null, body));
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_IMPORT_BYTES }, (_request, _body, done) => done(null, undefined));
  // PGlite is one connection that every request shares: the import keeps its transactions short
  // there, and takes the connection in the requests' pauses.
  const options = { oneConnection };
  const check = (body: Record<string, unknown>) => bodyErrors(ContactBody, body);

  app.post(
    '/users/:user_id/contacts/import',
    {
      config: { owner: 'user_id' },
      bodyLimit: MAX_IMPORT_BYTES,
      // The body is the file's bytes, read by the handler; its schema only tells the document so.
      validatorCompiler: (route) => (route.httpPart === 'body' ? () => true : validatorCompiler(route)),
      schema: {
        tags: ['Contacts'],
        summary: 'Import contacts from CSV or JSON lines (up to 50,000 rows or 20 MB)',
        description:
          'The body is the file: `text/csv` with a header row naming the columns, or `application/x-ndjson` with one ' +
          'contact body a line. A CSV is read as exported by Google Contacts, Outlook, Apple Contacts or a spreadsheet: ' +
          'its encoding found (UTF-8 with or without a byte order mark, UTF-16, Windows-1252; or the `charset` the ' +
          'Content-Type names) or the file refused, never guessed into replacement characters; its separator (`,` `;` ' +
          'tab) sniffed from the header row; its columns mapped to first_name, last_name, email, phone, time_zone, ' +
          'status and tags by the names they go by in exports (case, spacing and punctuation ignored) or by `column` ' +
          'mappings; columns that map to no field are ignored and listed in `file.ignored_columns`. Tags are ' +
          "separated by `;` (Google's `Labels` by ` ::: `). A row whose email (any case), or without an email whose " +
          'phone, matches a live contact updates it: the non-empty cells are written and its tags are added to. Other ' +
          'rows are created. A row whose status would change what a person said (an unsubscribe or complaint of their own) is refused; ' +
          'without a status, a row at their address keeps or takes their status. ' +
          'Invalid rows are refused with their line and the reasons, the others imported, in batches ' +
          'that each commit whole. Importing the same file again creates nothing.',
        params: UserIdParams,
        querystring: Type.Object(
          {
            tag: Type.Optional(
              Type.Array(Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\u0000]*$' }), {
                maxItems: 20,
                description: 'A tag added to every contact imported',
              }),
            ),
            column: Type.Optional(
              Type.Array(Type.String({ minLength: 1, maxLength: 300, pattern: '^[^\\u0000]*$' }), {
                maxItems: 100,
                description:
                  'A mapping `NAME:field` of a header column (any case and spacing) to a contact field, or to `ignore`; ' +
                  'it wins over the names the column would otherwise go by (`column=Handy:phone`)',
              }),
            ),
          },
          { additionalProperties: false },
        ),
        body: { content: Object.fromEntries(ACCEPTED.map((type) => [type, { schema: Type.String({ format: 'binary' }) }])) },
        response: { 200: ImportResult, ...problems(...AUTHENTICATED_ERRORS, 413, 415) },
      },
    },
    async (request) => {
      const [type = '', ...parameters] = String(request.headers['content-type'] ?? '')
        .toLowerCase()
        .split(';')
        .map((part) => part.trim());
      if (!Buffer.isBuffer(request.body) || !ACCEPTED.includes(type)) {
        throw new HttpError('unsupported_media_type', `${ACCEPTS}. The request's Content-Type is ${type || 'missing'}.`);
      }
      const label = parameters
        .find((part) => part.startsWith('charset='))
        ?.slice('charset='.length)
        .replace(/^"|"$/g, '');
      const charset = label === undefined ? undefined : knownCharset(label);
      if (label !== undefined && !charset) {
        throw new HttpError(
          'unsupported_media_type',
          `The charset "${label}" is not an encoding Hopper knows; name one of the Encoding Standard (utf-8, utf-16le, windows-1252, …) or leave it out to have it found.`,
        );
      }
      const query = request.query as { tag?: string[]; column?: string[] };
      const mapping = readMapping(query.column ?? []);
      if (type === JSON_LINES) {
        const rows = await readJsonLines(readText(request.body, charset));
        return importContacts(db, request.owner.id, rows, check, query.tag ?? [], clock(), options);
      }
      const { rows, reading } = await readCsv(readText(request.body, charset), mapping);
      const result = await importContacts(db, request.owner.id, rows, check, query.tag ?? [], clock(), options);
      return { ...result, file: reading };
    },
  );
};
