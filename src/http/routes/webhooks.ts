import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import type { Principal } from '../../identity/access.ts';
import { Id, Success } from '../../json-schema.ts';
import {
  searchWebhookDeliveries,
  searchWebhookEvents,
  WEBHOOK_DELIVERY_FILTERS,
  WEBHOOK_EVENT_FILTERS,
  WebhookDelivery,
  WebhookDeliveryDetail,
} from '../../webhooks/deliveries.ts';
import {
  CreateWebhookBody,
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  queueTestEvent,
  reachableWebhookEndpoint,
  resendToEndpoint,
  rotateWebhookSecret,
  searchWebhookEndpoints,
  toApiWebhookEndpoint,
  UpdateWebhookBody,
  updateWebhookEndpoint,
  WEBHOOK_FILTERS,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
  webhookDeliveryOf,
} from '../../webhooks/endpoints.ts';
import { ResendBody, ResendResult, WebhookEventQuery, WebhookEventRecord } from '../../webhooks/event-schemas.ts';
import type { App, RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from '../schemas.ts';

const tags = ['Webhooks'];
const errors = problems(...AUTHENTICATED_ERRORS);

/** Outbound webhook endpoints (docs/webhooks.md): owned like contacts; the secret is shown once. */
export const webhookRoutes: RoutePlugin = async (app, ctx) => {
  const { db } = ctx.database;
  const found = (principal: Principal, id: number) => reachableWebhookEndpoint(db, principal, id);
  endpointRoutes(app, ctx, found);
  secretAndTestRoutes(app, ctx, found);
  historyRoutes(app, ctx, found);
};

/** Finds the endpoint a route names, with its owner: reachable by the caller, or a 403/404. */
type FindEndpoint = (principal: Principal, id: number) => ReturnType<typeof reachableWebhookEndpoint>;

/** The endpoints themselves: list, register, read, change, delete. */
function endpointRoutes(app: App, { database: { db }, config, clock }: AppContext, found: FindEndpoint): void {
  const rules = { allowHttp: config.webhooks.allowHttp, allowPrivate: config.webhooks.allowPrivate };
  const reachable = async (principal: Principal, id: number) => (await found(principal, id)).row;

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
      const creator = { rank: request.principal.rank, teamId: request.principal.teamId };
      const row = await createWebhookEndpoint(db, request.owner, creator, request.body, rules, clock());
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
}

/** A new signing secret for an endpoint, and a test event sent to it. */
function secretAndTestRoutes(app: App, { database: { db }, clock }: AppContext, found: FindEndpoint): void {
  const reachable = async (principal: Principal, id: number) => (await found(principal, id)).row;

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
}

/** What was sent to an endpoint and sending it again: its deliveries, one delivery, the user's events, a resend. */
function historyRoutes(app: App, { database: { db }, config, clock }: AppContext, found: FindEndpoint): void {
  const reachable = async (principal: Principal, id: number) => (await found(principal, id)).row;

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
      const page = await searchWebhookDeliveries(db, endpoint.id, request.query, request.principal);
      return envelope(page, (row) => row, request, config.publicUrl);
    },
  );

  app.get(
    '/webhooks/:id/deliveries/:delivery_id',
    {
      schema: {
        tags,
        summary: 'One delivery of an endpoint: every attempt (status, error or answer excerpt, duration, next retry) and the body it posts',
        params: Type.Object({ id: Id, delivery_id: Id }, { additionalProperties: false }),
        response: { 200: WebhookDeliveryDetail, ...errors },
      },
    },
    async (request) =>
      webhookDeliveryOf(db, await reachable(request.principal, request.params.id), request.params.delivery_id, request.principal),
  );

  app.get(
    '/users/:user_id/webhook_events',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: "A user's events, oldest first, as posted (filters `type`, `since`, `until`)",
        params: UserIdParams,
        querystring: Type.Object(
          { ...searchQuery(WEBHOOK_EVENT_FILTERS).properties, ...WebhookEventQuery },
          { additionalProperties: false },
        ),
        response: { 200: envelopeSchema(WebhookEventRecord), ...errors },
      },
    },
    async (request) => {
      const { since, until, ...params } = request.query;
      const window = { ...(since ? { since: new Date(since) } : {}), ...(until ? { until: new Date(until) } : {}) };
      const found = await searchWebhookEvents(db, request.owner.id, { ...params, ...window }, config.publicUrl);
      return envelope(found, (row) => row, request, config.publicUrl);
    },
  );

  app.post(
    '/webhooks/:id/resend',
    {
      schema: {
        tags,
        summary:
          'Send events again to the endpoint: one event (`event_id`), or the next 1,000 it subscribes to since a time (`since`, `until`, `after_event_id`); WEBHOOK_RESEND_PER_HOUR events an hour per user (then 429)',
        params: IdParams,
        body: ResendBody,
        response: { 202: ResendResult, ...errors },
      },
    },
    async (request, reply) => {
      const { row, owner } = await found(request.principal, request.params.id);
      const limits = { perHour: config.webhooks.resendPerHour, now: clock() };
      return reply.code(202).send(await resendToEndpoint(db, row, owner, request.body, limits));
    },
  );
}
