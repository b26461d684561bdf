import { Type } from 'typebox';
import type { App, AppContext } from '../../app.ts';
import { requireReachableResource, requireReachableUser } from '../../identity/access.ts';
import { createApiKey, findLiveApiKey, revokeApiKey, toApiKey } from '../../identity/api-keys.ts';
import { findUser } from '../../identity/users.ts';
import { AUTHENTICATED_ERRORS, Id, IdParams, Nullable, problems, Success, Timestamp, UserIdParams, WritableBody } from '../schemas.ts';
import { envelopeSchema, type Filters, searchPage, searchQuery } from '../search.ts';

const ApiKey = Type.Object({
  id: Id,
  name: Type.String(),
  prefix: Type.String({ description: 'The first characters of the key, to tell keys apart' }),
  created_at: Timestamp,
  last_used_at: Nullable(Timestamp),
});
const NewApiKey = Type.Object({
  ...ApiKey.properties,
  key: Type.String({ description: 'The full key. Shown in this response only: store it now.' }),
});
const ApiKeyBody = WritableBody({ name: Type.String({ minLength: 1, maxLength: 255 }) }, ['id', 'prefix', 'created_at', 'last_used_at']);
const FILTERS: Filters = { id: { kind: 'id', column: 'id' }, name: { kind: 'text', column: 'name' } };

/** API keys: anyone who may reach a user may list, create and revoke that user's keys. */
export async function apiKeyRoutes(app: App, { database: { db }, config }: AppContext): Promise<void> {
  const tags = ['API keys'];
  const errors = problems(...AUTHENTICATED_ERRORS);

  app.get(
    '/users/:user_id/api_keys',
    {
      schema: {
        tags,
        summary: "List a user's live keys",
        params: UserIdParams,
        querystring: searchQuery(FILTERS),
        response: { 200: envelopeSchema(ApiKey), ...errors },
      },
    },
    async (request) => {
      const user = requireReachableUser(request.principal, await findUser(db, request.params.user_id), request.params.user_id);
      const query = db.selectFrom('api_keys').selectAll().where('user_id', '=', user.id).where('revoked_at', 'is', null);
      return searchPage(query, FILTERS, request.query, request, config.publicUrl, 'id', toApiKey);
    },
  );

  app.post(
    '/users/:user_id/api_keys',
    {
      schema: {
        tags,
        summary: 'Create a key (the full key is in this response only)',
        params: UserIdParams,
        body: ApiKeyBody,
        response: { 201: NewApiKey, ...errors },
      },
    },
    async (request, reply) => {
      const user = requireReachableUser(request.principal, await findUser(db, request.params.user_id), request.params.user_id);
      const { key, row } = await createApiKey(db, user.id, request.body.name);
      return reply
        .code(201)
        .header('Location', `${config.publicUrl}/v3/api_keys/${row.id}`)
        .header('Cache-Control', 'no-store')
        .send({ ...toApiKey(row), key });
    },
  );

  app.get(
    '/api_keys/:id',
    { schema: { tags, summary: 'Read a key (without the secret)', params: IdParams, response: { 200: ApiKey, ...errors } } },
    async (request) => toApiKey(await reachableKey(request.principal, request.params.id)),
  );

  app.delete(
    '/api_keys/:id',
    {
      schema: {
        tags,
        summary: 'Revoke a key: it stops working on the next request',
        params: IdParams,
        response: { 200: Success, ...errors },
      },
    },
    async (request) => {
      const key = await reachableKey(request.principal, request.params.id);
      await revokeApiKey(db, key.id);
      return { success: true };
    },
  );

  async function reachableKey(principal: Parameters<typeof requireReachableResource>[0], id: number) {
    const found = await findLiveApiKey(db, id);
    return requireReachableResource(
      principal,
      found && { owner: { id: found.user_id, team_id: found.team_id, roles: found.roles }, row: found },
      'API key',
      id,
    );
  }
}
