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
import { REPLY_FILTERS, Reply, searchReplies, toApiReply } from '../../inbound/replies.ts';
import { findEmail } from '../../messages/message-tables.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { messageRoutes } from '../message-routes.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems } from '../schemas.ts';

/** The specification's templated email endpoints: search, create, read, update, delete, the deliveries of one, and its replies. */
export const templatedEmailRoutes: RoutePlugin = async (app, ctx) => {
  const tags = ['Templated emails'];
  const reachableEmail = messageRoutes(app, ctx, {
    kind: 'templated_email',
    path: 'templated_emails',
    noun: 'templated email',
    tags,
    schema: TemplatedEmail,
    createBody: EmailBody,
    updateBody: EmailBody,
    filters: EMAIL_FILTERS,
    search: searchEmails,
    find: findEmail,
    create: createEmail,
    update: updateEmail,
    remove: deleteEmail,
    toApi: toApiTemplatedEmail,
  });

  app.get(
    '/templated_emails/:id/replies',
    {
      schema: {
        tags,
        summary: 'List the replies contacts sent to a templated email (filters are OR-combined)',
        params: IdParams,
        querystring: searchQuery(REPLY_FILTERS),
        response: { 200: envelopeSchema(Reply), ...problems(...AUTHENTICATED_ERRORS) },
      },
    },
    async (request) => {
      const { row } = await reachableEmail(request);
      return envelope(await searchReplies(ctx.database.db, row, request.query), toApiReply, request, ctx.config.publicUrl);
    },
  );
};
