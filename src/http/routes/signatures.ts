import {
  CreateSignatureBody,
  createSignature,
  deleteSignature,
  findSignature,
  SIGNATURE_FILTERS,
  Signature,
  searchSignatures,
  toApiSignature,
  UpdateSignatureBody,
  updateSignature,
} from '../../email/signatures.ts';
import { notFound } from '../../errors.ts';
import { type Principal, requireReachable } from '../../identity/access.ts';
import { Success } from '../../json-schema.ts';
import { created } from '../created.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from '../schemas.ts';

/** Email signatures: owned like contacts; templated emails name one by `signature_id`. */
export const signatureRoutes: RoutePlugin = async (app, { database: { db }, config, clock }) => {
  const tags = ['Signatures'];
  const errors = problems(...AUTHENTICATED_ERRORS);
  const reachableSignature = async (principal: Principal, id: number) =>
    requireReachable(principal, await findSignature(db, id), 'Signature', id).row;

  app.get(
    '/users/:user_id/signatures',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: "Search a user's signatures",
        params: UserIdParams,
        querystring: searchQuery(SIGNATURE_FILTERS),
        response: { 200: envelopeSchema(Signature), ...errors },
      },
    },
    async (request) => envelope(await searchSignatures(db, request.owner.id, request.query), toApiSignature, request, config.publicUrl),
  );

  app.post(
    '/users/:user_id/signatures',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: 'Create a signature',
        params: UserIdParams,
        body: CreateSignatureBody,
        response: { 201: Signature, ...errors },
      },
    },
    async (request, reply) => {
      const row = await createSignature(db, request.owner.id, request.body, clock());
      return created(reply, `${config.publicUrl}/v3/signatures/${row.id}`, toApiSignature(row));
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
      const updated = await updateSignature(db, signature, request.body, clock());
      if (!updated) throw notFound('Signature', signature.id);
      return toApiSignature(updated);
    },
  );

  app.delete(
    '/signatures/:id',
    { schema: { tags, summary: 'Delete a signature', params: IdParams, response: { 200: Success, ...errors } } },
    async (request) => {
      await deleteSignature(db, await reachableSignature(request.principal, request.params.id), clock());
      return { success: true };
    },
  );
};
