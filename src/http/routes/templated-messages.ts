import {
  CreateTemplatedMessageBody,
  createTemplatedMessage,
  deleteTemplatedMessage,
  findTemplatedMessage,
  searchTemplatedMessages,
  TEMPLATED_MESSAGE_FILTERS,
  TemplatedMessage,
  toApiTemplatedMessage,
  UpdateTemplatedMessageBody,
  updateTemplatedMessage,
} from '../../email/templated-messages.ts';
import { notFound } from '../../errors.ts';
import { requireRank } from '../../identity/access.ts';
import { RANK } from '../../identity/roles.ts';
import { Success } from '../../json-schema.ts';
import { created } from '../created.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems } from '../schemas.ts';

/** The templated-message library: every user reads it, Administrators maintain it (docs/contacts.md, "The templated message library"). */
export const templatedMessageRoutes: RoutePlugin = async (app, { database: { db }, config, clock }) => {
  const tags = ['Templated messages'];
  const errors = problems(...AUTHENTICATED_ERRORS);
  const action = 'manage the templated message library';
  const missing = (id: number) => notFound('Templated message', id);

  app.get(
    '/templated_messages',
    {
      schema: {
        tags,
        summary: 'Search the template library',
        querystring: searchQuery(TEMPLATED_MESSAGE_FILTERS),
        response: { 200: envelopeSchema(TemplatedMessage), ...errors },
      },
    },
    async (request) => envelope(await searchTemplatedMessages(db, request.query), toApiTemplatedMessage, request, config.publicUrl),
  );

  app.post(
    '/templated_messages',
    {
      schema: {
        tags,
        summary: 'Add a template (Administrator)',
        body: CreateTemplatedMessageBody,
        response: { 201: TemplatedMessage, ...errors },
      },
    },
    async (request, reply) => {
      requireRank(request.principal, RANK.Administrator, action);
      const row = await createTemplatedMessage(db, request.body, clock());
      return created(reply, `${config.publicUrl}/v3/templated_messages/${row.id}`, toApiTemplatedMessage(row));
    },
  );

  app.get(
    '/templated_messages/:id',
    { schema: { tags, summary: 'Read a template', params: IdParams, response: { 200: TemplatedMessage, ...errors } } },
    async (request) => {
      const row = await findTemplatedMessage(db, request.params.id);
      if (!row) throw missing(request.params.id);
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
        body: UpdateTemplatedMessageBody,
        response: { 200: TemplatedMessage, ...errors },
      },
    },
    async (request) => {
      requireRank(request.principal, RANK.Administrator, action);
      const row = await updateTemplatedMessage(db, request.params.id, request.body, clock());
      if (!row) throw missing(request.params.id);
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
      if (!(await deleteTemplatedMessage(db, request.params.id, clock()))) throw missing(request.params.id);
      return { success: true };
    },
  );
};
