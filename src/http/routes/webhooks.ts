import { Type } from 'typebox';
import { type Principal, requireReachable } from '../../identity/access.ts';
import { Id, Success } from '../../json-schema.ts';
import { searchWebhookDeliveries, WEBHOOK_DELIVERY_FILTERS, WebhookDelivery } from '../../webhooks/deliveries.ts';
import {
  CreateWebhookBody,
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  findWebhookEndpoint,
  queueTestEvent,
  rotateWebhookSecret,
  searchWebhookEndpoints,
  toApiWebhookEndpoint,
  UpdateWebhookBody,
  updateWebhookEndpoint,
  WEBHOOK_FILTERS,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
} from '../../webhooks/endpoints.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from '../schemas.ts';

/** Outbound webhook endpoints (docs/webhooks.md): owned like contacts; the secret is shown once. */
export const webhookRoutes: RoutePlugin = async (app, { database: { db }, config, clock }) => {
  const tags = ['Webhooks'];
  const errors = problems(...AUTHENTICATED_ERRORS);
  const rules = { allowHttp: config.webhooks.allowHttp, allowPrivate: config.webhooks.allowPrivate };
  const reachable = async (principal: Principal, id: number) =>
    requireReachable(principal, await findWebhookEndpoint(db, id), 'Webhook', id).row;

  app.get(
    '/users/:user_id/webhooks',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: "List a user's webhook endpoints",
        params: UserIdParams,
        querystring: searchQuery(WEBHOOK_FILTERS),
        response: { 200: envelopeSchema(WebhookEndpoint), ...errors },
      },
    },
    async (request) =>
      envelope(await searchWebhookEndpoints(db, request.owner.id, request.query), toApiWebhookEndpoint, request, config.publicUrl),
  );

  app.post(
    '/users/:user_id/webhooks',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: 'Register a webhook endpoint; the answer holds its signing secret, shown only now',
        params: UserIdParams,
        body: CreateWebhookBody,
        response: { 201: WebhookEndpointWithSecret, ...errors },
      },
    },
    async (request, reply) => {
      const row = await createWebhookEndpoint(db, request.owner.id, request.body, rules, clock());
      return reply
        .code(201)
        .header('Location', `${config.publicUrl}/v3/webhooks/${row.id}`)
        .send({ ...toApiWebhookEndpoint(row), secret: row.secret });
    },
  );

  app.get(
    '/webhooks/:id',
    { schema: { tags, summary: 'Read a webhook endpoint', params: IdParams, response: { 200: WebhookEndpoint, ...errors } } },
    async (request) => toApiWebhookEndpoint(await reachable(request.principal, request.params.id)),
  );

  app.put(
    '/webhooks/:id',
    {
      schema: {
        tags,
        summary: 'Change a webhook endpoint (fields present); enabling it again clears why it was disabled',
        params: IdParams,
        body: UpdateWebhookBody,
        response: { 200: WebhookEndpoint, ...errors },
      },
    },
    async (request) => {
      const endpoint = await reachable(request.principal, request.params.id);
      return toApiWebhookEndpoint(await updateWebhookEndpoint(db, endpoint, request.body, rules, clock()));
    },
  );

  app.delete(
    '/webhooks/:id',
    { schema: { tags, summary: 'Delete a webhook endpoint and its deliveries', params: IdParams, response: { 200: Success, ...errors } } },
    async (request) => {
      await deleteWebhookEndpoint(db, await reachable(request.principal, request.params.id));
      return { success: true };
    },
  );

  app.post(
    '/webhooks/:id/rotate',
    {
      schema: {
        tags,
        summary: 'Make a new signing secret; the old one keeps signing alongside it for 24 hours',
        params: IdParams,
        response: { 200: WebhookEndpointWithSecret, ...errors },
      },
    },
    async (request) => {
      const row = await rotateWebhookSecret(db, await reachable(request.principal, request.params.id), clock());
      return { ...toApiWebhookEndpoint(row), secret: row.secret };
    },
  );

  app.post(
    '/webhooks/:id/test',
    {
      schema: {
        tags,
        summary: 'Send a webhook.test event to the endpoint',
        params: IdParams,
        response: {
          202: Type.Object(
            { delivery_id: Id },
            { title: 'WebhookTestQueued', description: 'The delivery of the test event, listed among the deliveries' },
          ),
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const id = await queueTestEvent(db, await reachable(request.principal, request.params.id), clock());
      return reply.code(202).send({ delivery_id: id });
    },
  );

  app.get(
    '/webhooks/:id/deliveries',
    {
      schema: {
        tags,
        summary: "An endpoint's deliveries with every attempt (status, response code, duration, next retry)",
        params: IdParams,
        querystring: searchQuery(WEBHOOK_DELIVERY_FILTERS),
        response: { 200: envelopeSchema(WebhookDelivery), ...errors },
      },
    },
    async (request) => {
      const endpoint = await reachable(request.principal, request.params.id);
      return envelope(await searchWebhookDeliveries(db, endpoint.id, request.query), (row) => row, request, config.publicUrl);
    },
  );
};
