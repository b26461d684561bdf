import { type Static, Type } from 'typebox';
import type { App, AppContext } from '../../app.ts';
import { requireRank } from '../../identity/access.ts';
import { RANK } from '../../identity/roles.ts';
import { isBlankHtml, sanitizeEmailHtml } from '../../messaging/email-html.ts';
import {
  DEFAULT_GREETINGS,
  deleteTemplatedMessage,
  findTemplatedMessage,
  insertTemplatedMessage,
  type TemplatedMessageChanges,
  toApiTemplatedMessage,
  updateTemplatedMessage,
} from '../../messaging/templated-messages.ts';
import { type FieldErrors, HttpError, validationError } from '../problems.ts';
import { AUTHENTICATED_ERRORS, Id, IdParams, Nullable, problems, Success, Timestamp, WritableBody } from '../schemas.ts';
import { envelopeSchema, type Filters, searchPage, searchQuery } from '../search.ts';

const TemplatedMessage = Type.Object({
  id: Id,
  name: Type.String(),
  subject: Type.String(),
  description: Nullable(Type.String()),
  greeting_with_first_name: Type.String(),
  greeting_without_first_name: Type.String(),
  body: Type.String({ description: 'Email HTML, sanitised on save' }),
  closing: Nullable(Type.String()),
  ps_line: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
});

const required = {
  name: Type.String({ minLength: 1, maxLength: 255 }),
  subject: Type.String({ minLength: 1, maxLength: 998, description: 'One line; merge tags such as {{first_name}} work' }),
  body: Type.String({ minLength: 1, maxLength: 500_000, description: 'Email HTML; unsafe markup is removed on save' }),
};
const optional = {
  description: Nullable(Type.String({ maxLength: 1000 })),
  greeting_with_first_name: Type.String({ maxLength: 255, description: `Default: ${DEFAULT_GREETINGS.greeting_with_first_name}` }),
  greeting_without_first_name: Type.String({ maxLength: 255, description: `Default: ${DEFAULT_GREETINGS.greeting_without_first_name}` }),
  closing: Nullable(Type.String({ maxLength: 255 })),
  ps_line: Nullable(Type.String({ maxLength: 1000 })),
};
const READ_ONLY = ['id', 'created_at', 'updated_at', 'deleted_at'];
const CreateBody = WritableBody({ ...required, ...Type.Partial(Type.Object(optional)).properties }, READ_ONLY);
const UpdateBody = WritableBody(Type.Partial(Type.Object({ ...required, ...optional })).properties, READ_ONLY);
const TEXT = (column: string) => ({ kind: 'text', column }) as const;
const FILTERS: Filters = {
  id: { kind: 'id', column: 'id' },
  name: TEXT('name'),
  subject: TEXT('subject'),
  description: TEXT('description'),
};
const WRITABLE = [...Object.keys(required), ...Object.keys(optional)] as (keyof TemplatedMessageChanges)[];

/** The writable fields present, checked and cleaned: names trimmed, subject on one line, body sanitised. */
function templateChanges(body: Partial<Static<typeof UpdateBody>>): TemplatedMessageChanges {
  const errors: FieldErrors = {};
  const changes: Record<string, unknown> = {};
  for (const key of WRITABLE) if (body[key] !== undefined) changes[key] = body[key];
  if (body.name !== undefined) {
    changes.name = body.name.trim();
    if (changes.name === '') errors.name = ['must not be blank'];
  }
  if (body.subject !== undefined) {
    changes.subject = body.subject.trim();
    // The subject becomes a mail header: a line break would start a header of the caller's choosing.
    if (/[\r\n]/.test(body.subject)) errors.subject = ['must be a single line'];
    else if (changes.subject === '') errors.subject = ['must not be blank'];
  }
  if (body.body !== undefined) {
    changes.body = sanitizeEmailHtml(body.body);
    if (isBlankHtml(changes.body as string)) errors.body = ['has no content once unsafe HTML is removed'];
  }
  if (Object.keys(errors).length > 0) throw validationError(errors);
  return changes as TemplatedMessageChanges;
}

/** The templated-message library: every user reads it, Administrators maintain it (DESIGN.md §6). */
export async function templatedMessageRoutes(app: App, { database: { db }, config }: AppContext): Promise<void> {
  const tags = ['Templated messages'];
  const errors = problems(...AUTHENTICATED_ERRORS);
  const action = 'manage the templated message library';

  app.get(
    '/templated_messages',
    {
      schema: {
        tags,
        summary: 'Search the template library',
        querystring: searchQuery(FILTERS),
        response: { 200: envelopeSchema(TemplatedMessage), ...errors },
      },
    },
    async (request) => {
      const query = db.selectFrom('templated_messages').selectAll().where('deleted_at', 'is', null);
      return searchPage(query, FILTERS, request.query, request, config.publicUrl, 'id', toApiTemplatedMessage);
    },
  );

  app.post(
    '/templated_messages',
    {
      schema: { tags, summary: 'Add a template (Administrator)', body: CreateBody, response: { 201: TemplatedMessage, ...errors } },
    },
    async (request, reply) => {
      requireRank(request.principal, RANK.Administrator, action);
      const row = await insertTemplatedMessage(db, {
        ...DEFAULT_GREETINGS,
        ...(templateChanges(request.body) as Required<Pick<TemplatedMessageChanges, 'name' | 'subject' | 'body'>>),
      });
      return reply.code(201).header('Location', `${config.publicUrl}/v3/templated_messages/${row.id}`).send(toApiTemplatedMessage(row));
    },
  );

  app.get(
    '/templated_messages/:id',
    { schema: { tags, summary: 'Read a template', params: IdParams, response: { 200: TemplatedMessage, ...errors } } },
    async (request) => {
      const row = await findTemplatedMessage(db, request.params.id);
      if (!row) throw new HttpError('not_found', `Templated message ${request.params.id} does not exist.`);
      return toApiTemplatedMessage(row);
    },
  );

  app.put(
    '/templated_messages/:id',
    {
      schema: {
        tags,
        summary: 'Update a template, only the fields sent (Administrator)',
        params: IdParams,
        body: UpdateBody,
        response: { 200: TemplatedMessage, ...errors },
      },
    },
    async (request) => {
      requireRank(request.principal, RANK.Administrator, action);
      const row = await updateTemplatedMessage(db, request.params.id, templateChanges(request.body));
      if (!row) throw new HttpError('not_found', `Templated message ${request.params.id} does not exist.`);
      return toApiTemplatedMessage(row);
    },
  );

  app.delete(
    '/templated_messages/:id',
    {
      schema: { tags, summary: 'Delete a template (Administrator)', params: IdParams, response: { 200: Success, ...errors } },
    },
    async (request) => {
      requireRank(request.principal, RANK.Administrator, action);
      if (!(await deleteTemplatedMessage(db, request.params.id))) {
        throw new HttpError('not_found', `Templated message ${request.params.id} does not exist.`);
      }
      return { success: true };
    },
  );
}
