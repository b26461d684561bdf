import { CountCache } from '../../db/search.ts';
import { type Principal, requireReachable } from '../../identity/access.ts';
import { Success } from '../../json-schema.ts';
import { findDrop } from '../../messages/message-tables.ts';
import { searchDeliveries } from '../../sending/deliveries.ts';
import { DELIVERY_FILTERS, Delivery, toApiDelivery } from '../../sending/delivery-listing.ts';
import {
  CreateDropBody,
  createDrop,
  DROP_FILTERS,
  deleteDrop,
  searchDrops,
  toApiVoicemailDrop,
  UpdateDropBody,
  updateDrop,
  VoicemailDrop,
} from '../../voicemail/drops.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from '../schemas.ts';

/** The specification's voicemail drop endpoints: search, create, read, update, delete, and the deliveries of one. */
export const voicemailDropRoutes: RoutePlugin = async (app, ctx) => {
  const { db } = ctx.database;
  const { publicUrl } = ctx.config;
  const tags = ['Voicemail drops'];
  const errors = problems(...AUTHENTICATED_ERRORS);
  const toApi = (view: Parameters<typeof toApiVoicemailDrop>[0]) => toApiVoicemailDrop(view, publicUrl);
  const reachableDrop = async ({ principal, params: { id } }: { principal: Principal; params: { id: number } }) =>
    requireReachable(principal, await findDrop(db, id), 'Voicemail drop', id);
  // Search totals, reused while the owner's drops are unchanged (see CountCache).
  const totals = new CountCache();

  app.get(
    '/users/:user_id/voicemail_drops',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: "Search a user's voicemail drops (filters are OR-combined)",
        params: UserIdParams,
        querystring: searchQuery(DROP_FILTERS),
        response: { 200: envelopeSchema(VoicemailDrop), ...errors },
      },
    },
    async (request) => envelope(await searchDrops(db, request.owner.id, request.query, totals), toApi, request, publicUrl),
  );

  app.post(
    '/users/:user_id/voicemail_drops',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: 'Create a voicemail drop',
        params: UserIdParams,
        body: CreateDropBody,
        response: { 201: VoicemailDrop, ...errors },
      },
    },
    async (request, reply) => {
      const view = await createDrop(ctx, request.owner, request.body);
      return reply.code(201).header('Location', `${publicUrl}/v3/voicemail_drops/${view.row.id}`).send(toApi(view));
    },
  );

  app.get(
    '/voicemail_drops/:id',
    { schema: { tags, summary: 'Read a voicemail drop', params: IdParams, response: { 200: VoicemailDrop, ...errors } } },
    async (request) => toApi(await reachableDrop(request)),
  );

  app.put(
    '/voicemail_drops/:id',
    {
      schema: {
        tags,
        summary: 'Update a voicemail drop (only the fields sent); status Cancelled stops one that is Sending',
        params: IdParams,
        body: UpdateDropBody,
        response: { 200: VoicemailDrop, ...errors },
      },
    },
    async (request) => toApi(await updateDrop(ctx, await reachableDrop(request), request.body)),
  );

  app.get(
    '/voicemail_drops/:id/deliveries',
    {
      schema: {
        tags,
        summary: 'List the deliveries of a voicemail drop, one per recipient (filters are OR-combined)',
        params: IdParams,
        querystring: searchQuery(DELIVERY_FILTERS),
        response: { 200: envelopeSchema(Delivery), ...errors },
      },
    },
    async (request) => {
      const { row } = await reachableDrop(request);
      const message = { external_id: row.external_id, metadata: row.metadata };
      return envelope(
        await searchDeliveries(db, 'voicemail_drop', row, request.query),
        (d) => toApiDelivery(d, message),
        request,
        publicUrl,
      );
    },
  );

  app.delete(
    '/voicemail_drops/:id',
    {
      schema: {
        tags,
        summary: 'Delete a voicemail drop (a scheduled one is not sent)',
        params: IdParams,
        response: { 200: Success, ...errors },
      },
    },
    async (request) => {
      await deleteDrop(ctx, await reachableDrop(request));
      return { success: true };
    },
  );
};
