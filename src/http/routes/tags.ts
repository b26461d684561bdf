import { Type } from 'typebox';
import type { App, AppContext } from '../../app.ts';
import { contactCounts, deleteTag, insertTag, renameTag, toApiTag } from '../../contacts/tags.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { findOwnedRow } from '../../db/owned-rows.ts';
import type { TagRow } from '../../db/schema.ts';
import { type Principal, requireReachableResource, requireReachableUser } from '../../identity/access.ts';
import { findUser } from '../../identity/users.ts';
import { HttpError, validationError } from '../problems.ts';
import { AUTHENTICATED_ERRORS, Id, IdParams, problems, Success, Timestamp, UserIdParams, WritableBody } from '../schemas.ts';
import { envelopeSchema, type Filters, searchPage, searchQuery } from '../search.ts';

const Tag = Type.Object({
  id: Id,
  name: Type.String(),
  contacts_count: Type.Integer({ minimum: 0, description: 'Live contacts carrying the tag' }),
  created_at: Timestamp,
  updated_at: Timestamp,
});
const Name = Type.String({ minLength: 1, maxLength: 255, description: 'Unique per user, ignoring case' });
const READ_ONLY = ['id', 'contacts_count', 'created_at', 'updated_at'];
const CreateTagBody = WritableBody({ name: Name }, READ_ONLY);
const UpdateTagBody = WritableBody({ name: Type.Optional(Name) }, READ_ONLY);
const FILTERS: Filters = { id: { kind: 'id', column: 'id' }, name: { kind: 'text', column: 'name' } };

function tagName(name: string): string {
  const trimmed = name.trim();
  if (trimmed === '') throw validationError({ name: ['must not be blank'] });
  return trimmed;
}

/** Two tags of one user differing only in case: the unique index decides, also between racing requests. */
async function uniqueName<T>(write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (error) {
    if (isUniqueViolation(error)) throw validationError({ name: ['is already taken'] });
    throw error;
  }
}

/** Tags: owned like contacts; contacts also create them by naming them. Deleting one is final. */
export async function tagRoutes(app: App, { database: { db }, config }: AppContext): Promise<void> {
  const tags = ['Tags'];
  const errors = problems(...AUTHENTICATED_ERRORS);

  async function reachableTag(principal: Principal, id: number): Promise<TagRow> {
    return requireReachableResource(principal, await findOwnedRow(db, 'tags', id), 'Tag', id);
  }
  async function withCount(row: TagRow) {
    return toApiTag(row, (await contactCounts(db, row.user_id, [row.id])).get(row.id) ?? 0);
  }

  app.get(
    '/users/:user_id/tags',
    {
      schema: {
        tags,
        summary: "Search a user's tags",
        params: UserIdParams,
        querystring: searchQuery(FILTERS),
        response: { 200: envelopeSchema(Tag), ...errors },
      },
    },
    async (request) => {
      const user = requireReachableUser(request.principal, await findUser(db, request.params.user_id), request.params.user_id);
      const query = db.selectFrom('tags').selectAll().where('user_id', '=', user.id);
      const page = await searchPage(query, FILTERS, request.query, request, config.publicUrl, 'id', (row) => row);
      const counts = await contactCounts(
        db,
        user.id,
        page.data.map((row) => row.id),
      );
      return { ...page, data: page.data.map((row) => toApiTag(row, counts.get(row.id) ?? 0)) };
    },
  );

  app.post(
    '/users/:user_id/tags',
    {
      schema: { tags, summary: 'Create a tag', params: UserIdParams, body: CreateTagBody, response: { 201: Tag, ...errors } },
    },
    async (request, reply) => {
      const user = requireReachableUser(request.principal, await findUser(db, request.params.user_id), request.params.user_id);
      const row = await uniqueName(insertTag(db, user.id, tagName(request.body.name)));
      return reply.code(201).header('Location', `${config.publicUrl}/v3/tags/${row.id}`).send(toApiTag(row, 0));
    },
  );

  app.get('/tags/:id', { schema: { tags, summary: 'Read a tag', params: IdParams, response: { 200: Tag, ...errors } } }, async (request) =>
    withCount(await reachableTag(request.principal, request.params.id)),
  );

  app.put(
    '/tags/:id',
    {
      schema: { tags, summary: 'Rename a tag', params: IdParams, body: UpdateTagBody, response: { 200: Tag, ...errors } },
    },
    async (request) => {
      const tag = await reachableTag(request.principal, request.params.id);
      if (request.body.name === undefined) return withCount(tag);
      const renamed = await uniqueName(renameTag(db, tag, tagName(request.body.name)));
      if (!renamed) throw new HttpError('not_found', `Tag ${tag.id} does not exist.`);
      return withCount(renamed);
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
}
