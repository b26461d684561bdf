import { CountCache } from '../../db/search.ts';
import {
  createEmail,
  deleteEmail,
  EMAIL_FILTERS,
  EmailBody,
  searchEmails,
  TemplatedEmail,
  toApiTemplatedEmail,
  updateEmail,
} from '../../email/templated-emails.ts';
import { type Principal, requireReachable } from '../../identity/access.ts';
import { REPLY_FILTERS, Reply, searchReplies, toApiReply } from '../../inbound/replies.ts';
import { Success } from '../../json-schema.ts';
import { findEmail } from '../../messages/message-tables.ts';
import { searchDeliveries } from '../../sending/deliveries.ts';
import { DELIVERY_FILTERS, Delivery, toApiDelivery } from '../../sending/delivery-listing.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from '../schemas.ts';

/** The specification's templated email endpoints: search, create, read, update, delete, and the deliveries of one. */
export const templatedEmailRoutes: RoutePlugin = async (app, ctx) => {
  const { db } = ctx.database;
  const { publicUrl } = ctx.config;
  const tags = ['Templated emails'];
  const errors = problems(...AUTHENTICATED_ERRORS);
  const toApi = toApiTemplatedEmail;
  const reachableEmail = async ({ principal, params: { id } }: { principal: Principal; params: { id: number } }) =>
    requireReachable(principal, await findEmail(db, id), 'Templated email', id);
  // Search totals, reused while the owner's templated emails are unchanged (see CountCache).
  const totals = new CountCache();

  app.get(
    '/users/:user_id/templated_emails',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: "Search a user's templated emails (filters are OR-combined)",
        params: UserIdParams,
        querystring: searchQuery(EMAIL_FILTERS),
        response: { 200: envelopeSchema(TemplatedEmail), ...errors },
      },
    },
    async (request) => envelope(await searchEmails(db, request.owner.id, request.query, totals), toApi, request, publicUrl),
  );

  app.post(
    '/users/:user_id/templated_emails',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: 'Create a templated email',
        params: UserIdParams,
        body: EmailBody,
        response: { 201: TemplatedEmail, ...errors },
      },
    },
    async (request, reply) => {
      const view = await createEmail(ctx, request.owner, request.body);
      return reply.code(201).header('Location', `${publicUrl}/v3/templated_emails/${view.row.id}`).send(toApi(view));
    },
  );

  app.get(
    '/templated_emails/:id',
    { schema: { tags, summary: 'Read a templated email', params: IdParams, response: { 200: TemplatedEmail, ...errors } } },
    async (request) => toApi(await reachableEmail(request)),
  );

  app.put(
    '/templated_emails/:id',
    {
      schema: {
        tags,
        summary: 'Update a templated email (only the fields sent); status Cancelled stops one that is Sending',
        params: IdParams,
        body: EmailBody,
        response: { 200: TemplatedEmail, ...errors },
      },
    },
    async (request) => toApi(await updateEmail(ctx, await reachableEmail(request), request.body)),
  );

  app.get(
    '/templated_emails/:id/deliveries',
    {
      schema: {
        tags,
        summary: 'List the deliveries of a templated email, one per recipient (filters are OR-combined)',
        params: IdParams,
        querystring: searchQuery(DELIVERY_FILTERS),
        response: { 200: envelopeSchema(Delivery), ...errors },
      },
    },
    async (request) => {
      const { row } = await reachableEmail(request);
      const message = { external_id: row.external_id, metadata: row.metadata };
      return envelope(
        await searchDeliveries(db, 'templated_email', row, request.query),
        (d) => toApiDelivery(d, message),
        request,
        publicUrl,
      );
    },
  );

  app.get(
    '/templated_emails/:id/replies',
    {
      schema: {
        tags,
        summary: 'List the replies contacts sent to a templated email (filters are OR-combined)',
        params: IdParams,
        querystring: searchQuery(REPLY_FILTERS),
        response: { 200: envelopeSchema(Reply), ...errors },
      },
    },
    async (request) => {
      const { row } = await reachableEmail(request);
      return envelope(await searchReplies(db, row, request.query), toApiReply, request, publicUrl);
    },
  );

  app.delete(
    '/templated_emails/:id',
    {
      schema: {
        tags,
        summary: 'Delete a templated email (a scheduled one is not sent)',
        params: IdParams,
        response: { 200: Success, ...errors },
      },
    },
    async (request) => {
      await deleteEmail(ctx, await reachableEmail(request));
      return { success: true };
    },
  );
};
