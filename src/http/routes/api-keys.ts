import { type Principal, requireManageable, requireReachable } from '../../identity/access.ts';
import {
  API_KEY_FILTERS,
  ApiKey,
  ApiKeyBody,
  createApiKey,
  findLiveApiKey,
  NewApiKey,
  requireMintable,
  revokeApiKey,
  searchApiKeys,
  toApiKey,
} from '../../identity/api-keys.ts';
import { Success } from '../../json-schema.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from '../schemas.ts';

/** API keys: who may list, mint and revoke whose keys is in identity/api-keys.ts. */
export const apiKeyRoutes: RoutePlugin = async (app, { database: { db }, config, clock }) => {
  const tags = ['API keys'];
  const errors = problems(...AUTHENTICATED_ERRORS);
  const reachableKey = async (principal: Principal, id: number) =>
    requireReachable(principal, await findLiveApiKey(db, id), 'API key', id).row;
  const manageableKey = async (principal: Principal, id: number) => {
    const found = requireReachable(principal, await findLiveApiKey(db, id), 'API key', id);
    requireManageable(principal, found.owner, 'revoke the keys');
    return found;
  };

  app.get(
    '/users/:user_id/api_keys',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: "List a user's live keys",
        params: UserIdParams,
        querystring: searchQuery(API_KEY_FILTERS),
        response: { 200: envelopeSchema(ApiKey), ...errors },
      },
    },
    async (request) => envelope(await searchApiKeys(db, request.owner.id, request.query), toApiKey, request, config.publicUrl),
  );

  app.post(
    '/users/:user_id/api_keys',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: 'Create a key (the full key is in this response only)',
        params: UserIdParams,
        body: ApiKeyBody,
        response: { 201: NewApiKey, ...errors },
      },
    },
    async (request, reply) => {
      requireMintable(request.principal, request.owner);
      const { key, row } = await createApiKey(db, request.owner.id, request.body.name, {
        createdBy: request.principal.userId,
        now: clock(),
        limit: config.apiKeysPerUser,
      });
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
      await revokeApiKey(db, await manageableKey(request.principal, request.params.id), clock());
      return { success: true };
    },
  );
};
