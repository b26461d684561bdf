import type { Static, TSchema } from 'typebox';
import type { AppContext } from '../app-context.ts';
import type { Db } from '../db/database.ts';
import type { UserRef } from '../db/owned-rows.ts';
import { CountCache, type Filters, type SearchParams, type SearchResult } from '../db/search.ts';
import { type Principal, requireReachable } from '../identity/access.ts';
import { Success } from '../json-schema.ts';
import type { MessageKind } from '../messages/kinds.ts';
import type { MessageView } from '../messages/message-tables.ts';
import { searchDeliveries } from '../sending/deliveries.ts';
import { DELIVERY_FILTERS, Delivery, type MessageCorrelation, toApiDelivery } from '../sending/delivery-listing.ts';
import { created } from './created.ts';
import type { App } from './fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from './paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from './schemas.ts';

type MessageRow = MessageCorrelation & { id: number; user_id: number };

/** What the routes of one message kind call: its module's schemas and operations (voicemail/drops.ts, email/templated-emails.ts). */
interface MessageKindRoutes<View extends MessageView<MessageRow>, Create extends TSchema, Update extends TSchema> {
  kind: MessageKind;
  /** The collection's path segment: `voicemail_drops`. */
  path: string;
  /** The kind as the summaries and errors name it, lower case: `voicemail drop`. */
  noun: string;
  tags: string[];
  schema: TSchema;
  createBody: Create;
  updateBody: Update;
  filters: Filters;
  search(db: Db, ownerId: number, params: SearchParams, totals: CountCache): Promise<SearchResult<View>>;
  find(db: Db, id: number): Promise<View | undefined>;
  create(ctx: AppContext, owner: UserRef, body: Static<Create>): Promise<View>;
  update(ctx: AppContext, view: View, body: Static<Update>): Promise<View>;
  remove(ctx: AppContext, view: View): Promise<void>;
  toApi(view: View): unknown;
}

/**
 * The routes both message kinds have, as the specification gives them: search, create, read,
 * update, the deliveries of one, delete. Returns how a route of the kind's own finds the message
 * named by its `id` (reachable by the caller, or a 403/404).
 */
export function messageRoutes<View extends MessageView<MessageRow>, Create extends TSchema, Update extends TSchema>(
  app: App,
  ctx: AppContext,
  kind: MessageKindRoutes<View, Create, Update>,
): (request: { principal: Principal; params: { id: number } }) => Promise<View> {
  const { db } = ctx.database;
  const { publicUrl } = ctx.config;
  const { path, noun, tags, schema } = kind;
  const errors = problems(...AUTHENTICATED_ERRORS);
  const named = `${noun[0]?.toUpperCase()}${noun.slice(1)}`;
  const reachable = async ({ principal, params: { id } }: { principal: Principal; params: { id: number } }) =>
    requireReachable(principal, await kind.find(db, id), named, id);
  const toApi = (view: View) => kind.toApi(view);
  // Search totals, reused while the owner's messages of this kind are unchanged (see CountCache).
  const totals = new CountCache();

  app.get(
    `/users/:user_id/${path}`,
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: `Search a user's ${noun}s (filters are OR-combined)`,
        params: UserIdParams,
        querystring: searchQuery(kind.filters),
        response: { 200: envelopeSchema(schema), ...errors },
      },
    },
    async (request) => envelope(await kind.search(db, request.owner.id, request.query, totals), toApi, request, publicUrl),
  );

  app.post(
    `/users/:user_id/${path}`,
    {
      config: { owner: 'user_id' },
      schema: { tags, summary: `Create a ${noun}`, params: UserIdParams, body: kind.createBody, response: { 201: schema, ...errors } },
    },
    async (request, reply) => {
      const view = await kind.create(ctx, request.owner, request.body as Static<Create>);
      return created(reply, `${publicUrl}/v3/${path}/${view.row.id}`, toApi(view));
    },
  );

  app.get(
    `/${path}/:id`,
    { schema: { tags, summary: `Read a ${noun}`, params: IdParams, response: { 200: schema, ...errors } } },
    async (request) => toApi(await reachable(request)),
  );

  app.put(
    `/${path}/:id`,
    {
      schema: {
        tags,
        summary: `Update a ${noun} (only the fields sent); status Cancelled stops one that is Sending`,
        params: IdParams,
        body: kind.updateBody,
        response: { 200: schema, ...errors },
      },
    },
    async (request) => toApi(await kind.update(ctx, await reachable(request), request.body as Static<Update>)),
  );

  app.get(
    `/${path}/:id/deliveries`,
    {
      schema: {
        tags,
        summary: `List the deliveries of a ${noun}, one per recipient (filters are OR-combined)`,
        params: IdParams,
        querystring: searchQuery(DELIVERY_FILTERS),
        response: { 200: envelopeSchema(Delivery), ...errors },
      },
    },
    async (request) => {
      const { row } = await reachable(request);
      const message = { external_id: row.external_id, metadata: row.metadata };
      return envelope(await searchDeliveries(db, kind.kind, row, request.query), (d) => toApiDelivery(d, message), request, publicUrl);
    },
  );

  app.delete(
    `/${path}/:id`,
    {
      schema: {
        tags,
        summary: `Delete a ${noun} (a scheduled one is not sent)`,
        params: IdParams,
        response: { 200: Success, ...errors },
      },
    },
    async (request) => {
      await kind.remove(ctx, await reachable(request));
      return { success: true };
    },
  );
  return reachable;
}
