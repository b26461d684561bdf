import { Type } from 'typebox';
import type { App, AppContext } from '../../app.ts';
import { deleteSignature, insertSignature, toApiSignature, updateSignature } from '../../contacts/signatures.ts';
import { findOwnedRow } from '../../db/owned-rows.ts';
import type { SignatureRow } from '../../db/schema.ts';
import { type Principal, requireReachableResource, requireReachableUser } from '../../identity/access.ts';
import { findUser } from '../../identity/users.ts';
import { isBlankHtml, sanitizeEmailHtml } from '../../messaging/email-html.ts';
import { type FieldErrors, HttpError, validationError } from '../problems.ts';
import { AUTHENTICATED_ERRORS, Id, IdParams, Nullable, problems, Success, Timestamp, UserIdParams, WritableBody } from '../schemas.ts';
import { envelopeSchema, type Filters, searchPage, searchQuery } from '../search.ts';

const Signature = Type.Object({
  id: Id,
  name: Type.String(),
  body: Type.String({ description: 'Email HTML, sanitised on save' }),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
});
const fields = {
  name: Type.String({ minLength: 1, maxLength: 255 }),
  body: Type.String({
    minLength: 1,
    maxLength: 100_000,
    description: 'Email HTML: tables, inline styles and images are kept; scripts, event handlers and forms are removed',
  }),
};
const READ_ONLY = ['id', 'created_at', 'updated_at', 'deleted_at'];
const CreateSignatureBody = WritableBody(fields, READ_ONLY);
const UpdateSignatureBody = WritableBody(Type.Partial(Type.Object(fields)).properties, READ_ONLY);
const FILTERS: Filters = { id: { kind: 'id', column: 'id' }, name: { kind: 'text', column: 'name' } };

/** Trimmed name and sanitised body, for the fields present. */
function signatureChanges(body: { name?: string; body?: string }): { name?: string; body?: string } {
  const errors: FieldErrors = {};
  const changes: { name?: string; body?: string } = {};
  if (body.name !== undefined) {
    changes.name = body.name.trim();
    if (changes.name === '') errors.name = ['must not be blank'];
  }
  if (body.body !== undefined) {
    changes.body = sanitizeEmailHtml(body.body);
    if (isBlankHtml(changes.body)) errors.body = ['has no content once unsafe HTML is removed'];
  }
  if (Object.keys(errors).length > 0) throw validationError(errors);
  return changes;
}

/** Email signatures: owned like contacts; templated emails name one by `signature_id`. */
export async function signatureRoutes(app: App, { database: { db }, config }: AppContext): Promise<void> {
  const tags = ['Signatures'];
  const errors = problems(...AUTHENTICATED_ERRORS);

  async function reachableSignature(principal: Principal, id: number): Promise<SignatureRow> {
    return requireReachableResource(principal, await findOwnedRow(db, 'signatures', id), 'Signature', id);
  }

  app.get(
    '/users/:user_id/signatures',
    {
      schema: {
        tags,
        summary: "Search a user's signatures",
        params: UserIdParams,
        querystring: searchQuery(FILTERS),
        response: { 200: envelopeSchema(Signature), ...errors },
      },
    },
    async (request) => {
      const user = requireReachableUser(request.principal, await findUser(db, request.params.user_id), request.params.user_id);
      const query = db.selectFrom('signatures').selectAll().where('user_id', '=', user.id).where('deleted_at', 'is', null);
      return searchPage(query, FILTERS, request.query, request, config.publicUrl, 'id', toApiSignature);
    },
  );

  app.post(
    '/users/:user_id/signatures',
    {
      schema: {
        tags,
        summary: 'Create a signature',
        params: UserIdParams,
        body: CreateSignatureBody,
        response: { 201: Signature, ...errors },
      },
    },
    async (request, reply) => {
      const user = requireReachableUser(request.principal, await findUser(db, request.params.user_id), request.params.user_id);
      const { name = '', body = '' } = signatureChanges(request.body);
      const row = await insertSignature(db, user.id, { name, body });
      return reply.code(201).header('Location', `${config.publicUrl}/v3/signatures/${row.id}`).send(toApiSignature(row));
    },
  );

  app.get(
    '/signatures/:id',
    { schema: { tags, summary: 'Read a signature', params: IdParams, response: { 200: Signature, ...errors } } },
    async (request) => toApiSignature(await reachableSignature(request.principal, request.params.id)),
  );

  app.put(
    '/signatures/:id',
    {
      schema: {
        tags,
        summary: 'Update a signature (only the fields sent)',
        params: IdParams,
        body: UpdateSignatureBody,
        response: { 200: Signature, ...errors },
      },
    },
    async (request) => {
      const signature = await reachableSignature(request.principal, request.params.id);
      const updated = await updateSignature(db, signature, signatureChanges(request.body));
      if (!updated) throw new HttpError('not_found', `Signature ${signature.id} does not exist.`);
      return toApiSignature(updated);
    },
  );

  app.delete(
    '/signatures/:id',
    { schema: { tags, summary: 'Delete a signature', params: IdParams, response: { 200: Success, ...errors } } },
    async (request) => {
      await deleteSignature(db, await reachableSignature(request.principal, request.params.id));
      return { success: true };
    },
  );
}
