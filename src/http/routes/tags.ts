import {
  CreateTagBody,
  createTag,
  deleteTag,
  findTag,
  renameTag,
  searchTags,
  TAG_FILTERS,
  Tag,
  toApiTag,
  UpdateTagBody,
  withContactsCount,
} from '../../contacts/tags.ts';
import { notFound } from '../../errors.ts';
import { type Principal, requireReachable } from '../../identity/access.ts';
import { Success } from '../../json-schema.ts';
import { created } from '../created.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from '../schemas.ts';

/** Tags: owned like contacts; contacts also create them by naming them. Deleting one is final. */
export const tagRoutes: RoutePlugin = async (app, { database: { db }, config, clock }) => {
  const tags = ['Tags'];
  const errors = problems(...AUTHENTICATED_ERRORS);
  // A create or a rename may name a tag the owner has.
  const writeErrors = problems(...AUTHENTICATED_ERRORS, 409);
  const reachableTag = async (principal: Principal, id: number) => requireReachable(principal, await findTag(db, id), 'Tag', id).row;

  app.get(
    '/users/:user_id/tags',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: "Search a user's tags",
        params: UserIdParams,
        querystring: searchQuery(TAG_FILTERS),
        response: { 200: envelopeSchema(Tag), ...errors },
      },
    },
    async (request) => envelope(await searchTags(db, request.owner.id, request.query), (tag) => tag, request, config.publicUrl),
  );

  app.post(
    '/users/:user_id/tags',
    {
      config: { owner: 'user_id' },
      schema: { tags, summary: 'Create a tag', params: UserIdParams, body: CreateTagBody, response: { 201: Tag, ...writeErrors } },
    },
    async (request, reply) => {
      const row = await createTag(db, request.owner.id, request.body.name, clock());
      return created(reply, `${config.publicUrl}/v3/tags/${row.id}`, toApiTag(row, 0));
    },
  );

  app.get('/tags/:id', { schema: { tags, summary: 'Read a tag', params: IdParams, response: { 200: Tag, ...errors } } }, async (request) =>
    withContactsCount(db, await reachableTag(request.principal, request.params.id)),
  );

  app.put(
    '/tags/:id',
    {
      schema: { tags, summary: 'Rename a tag', params: IdParams, body: UpdateTagBody, response: { 200: Tag, ...writeErrors } },
    },
    async (request) => {
      const tag = await reachableTag(request.principal, request.params.id);
      if (request.body.name === undefined) return withContactsCount(db, tag);
      const renamed = await renameTag(db, tag, request.body.name, clock());
      if (!renamed) throw notFound('Tag', tag.id);
      return withContactsCount(db, renamed);
    },
  );

  app.delete(
    '/tags/:id',
    {
      schema: { tags, summary: 'Delete a tag and take it off every contact', params: IdParams, response: { 200: Success, ...errors } },
    },
    async (request) => {
      await deleteTag(db, await reachableTag(request.principal, request.params.id));
      return { success: true };
    },
  );
};
