import { isDeepStrictEqual } from 'node:util';
import type { Kysely } from 'kysely';
import type { TSchema } from 'typebox';
import type { App, AppContext } from '../app.ts';
import type { Db } from '../db/database.ts';
import { precompiled } from '../db/precompiled.ts';
import { requireReachableResource, requireReachableUser } from '../identity/access.ts';
import { findUser } from '../identity/users.ts';
import { deletionRefusal, type MessageStatus } from '../messaging/lifecycle.ts';
import { type MessageView, toMessageView } from '../messaging/message-view.ts';
import type { MessageKind } from '../messaging/reporting.ts';
import { DELIVERY_FILTERS, Delivery, selectDeliveries, toApiDelivery } from './delivery-listing.ts';
import { validationError } from './problems.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, Success, UserIdParams } from './schemas.ts';
import { CountCache, envelopeSchema, type Filters, searchPage, searchQuery } from './search.ts';

type Row = { id: number; user_id: number; status: MessageStatus; send_at: Date | null };

/**
 * What tells the two message resources apart; the five operations of the specification (search,
 * create, read, update, delete) are the same for both and live in `registerMessageRoutes`.
 */
export interface MessageResource<R extends Row> {
  /** `voicemail_drops` or `templated_emails`: the collection path and the table. */
  collection: 'voicemail_drops' | 'templated_emails';
  kind: MessageKind;
  /** "Voicemail drop": for summaries and messages. */
  label: string;
  tag: string;
  schema: TSchema;
  createBody: TSchema;
  updateBody: TSchema;
  filters: Filters;
  /** The live messages among `ids`, as rows of `selectMessages` (with the resource's joins), in any order. */
  rowsByIds: (ctx: AppContext, ids: number[]) => Promise<object[]>;
  find: (ctx: AppContext, id: number) => Promise<MessageView<R> | undefined>;
  toApi: (view: MessageView<R>, ctx: AppContext) => unknown;
  /** Validates a create (`current` undefined) or partial update and returns the columns to write. */
  changes: (ctx: AppContext, ownerId: number, body: Record<string, unknown>, current: R | undefined) => Promise<Record<string, unknown>>;
}

export async function registerMessageRoutes<R extends Row>(app: App, ctx: AppContext, resource: MessageResource<R>): Promise<void> {
  const { db } = ctx.database;
  const { collection, label, schema } = resource;
  const tags = [resource.tag];
  const errors = problems(...AUTHENTICATED_ERRORS);
  const lower = label.toLowerCase();

  /**
   * A message that became Scheduled, or got a new send time, gets its due job in the same
   * transaction as the change: both are kept or neither. The job it may already have goes stale.
   */
  async function scheduleIfDue(
    trx: Db,
    id: number,
    before: { status: string; send_at?: Date | null } | undefined,
    after: Record<string, unknown>,
  ) {
    const sendAt = after.send_at as Date | null;
    if (after.status !== 'Scheduled' || !sendAt) return;
    if (before?.status === 'Scheduled' && before.send_at?.getTime() === sendAt.getTime()) return;
    await ctx.queue.scheduleDue(trx, { kind: resource.kind, id, sendAt: sendAt.toISOString() });
  }

  // Search totals, reused while the owner's messages are unchanged (see CountCache).
  const totals = new CountCache();

  async function reachable(principal: Parameters<typeof requireReachableResource>[0], id: number) {
    const view = await resource.find(ctx, id);
    return requireReachableResource(principal, view && { owner: view.owner, row: view }, label, id);
  }

  app.get(
    `/users/:user_id/${collection}`,
    {
      schema: {
        tags,
        summary: `Search a user's ${lower}s (filters are OR-combined)`,
        params: UserIdParams,
        querystring: searchQuery(resource.filters),
        response: { 200: envelopeSchema(schema), ...errors },
      },
    },
    async (request) => {
      const user = requireReachableUser(request.principal, await findUser(db, request.params.user_id), request.params.user_id);
      // The page's ids and the total come from the message table alone (the owner is known to be
      // live, and every message's media exists); the page's rows are then read by id in one
      // statement that is prepared once, however the search was filtered.
      // The table is the resource's, which Kysely's types cannot follow.
      // biome-ignore lint/suspicious/noExplicitAny: see above
      const query = (db as unknown as Kysely<any>)
        .selectFrom(`${collection} as msg`)
        .where('msg.user_id', '=', user.id)
        .where('msg.deleted_at', 'is', null);
      return searchPage(
        query,
        resource.filters,
        request.query,
        request,
        ctx.config.publicUrl,
        'msg.id',
        (joined) => resource.toApi(toMessageView<R>(joined as object), ctx),
        {
          counts: { cache: totals, key: `${collection} ${user.id}`, version: () => collectionVersion(db, collection, user.id) },
          rowsByIds: (ids) => resource.rowsByIds(ctx, ids),
        },
      );
    },
  );

  app.post(
    `/users/:user_id/${collection}`,
    {
      schema: { tags, summary: `Create a ${lower}`, params: UserIdParams, body: resource.createBody, response: { 201: schema, ...errors } },
    },
    async (request, reply) => {
      const user = requireReachableUser(request.principal, await findUser(db, request.params.user_id), request.params.user_id);
      const values = await resource.changes(ctx, user.id, request.body as Record<string, unknown>, undefined);
      const id = await db.transaction().execute(async (trx) => {
        const { id } = await trx
          .insertInto(collection)
          .values({ ...values, user_id: user.id } as never)
          .returning('id')
          .executeTakeFirstOrThrow();
        await scheduleIfDue(trx, id, undefined, values);
        return id;
      });
      const view = await resource.find(ctx, id);
      return reply.code(201).header('Location', `${ctx.config.publicUrl}/v3/${collection}/${id}`).send(resource.toApi(view!, ctx));
    },
  );

  app.get(
    `/${collection}/:id`,
    { schema: { tags, summary: `Read a ${lower}`, params: IdParams, response: { 200: schema, ...errors } } },
    async (request) => resource.toApi(await reachable(request.principal, request.params.id), ctx),
  );

  app.put(
    `/${collection}/:id`,
    {
      schema: {
        tags,
        summary: `Update a ${lower} (only the fields sent); status Cancelled stops one that is Sending`,
        params: IdParams,
        body: resource.updateBody,
        response: { 200: schema, ...errors },
      },
    },
    async (request) => {
      for (let attempt = 1; ; attempt++) {
        const view = await reachable(request.principal, request.params.id);
        const { row } = view;
        const values = await resource.changes(ctx, row.user_id, request.body as Record<string, unknown>, row);
        // A body that changes nothing (a client PUTting back what it read) writes nothing.
        if (isUnchanged(row, values)) return resource.toApi(view, ctx);
        // The write applies only to the message as it was checked: if the sending engine moved it on
        // (Scheduled → Sending) or it was deleted meanwhile, it is checked again against its new state.
        // A message scheduled or rescheduled by this update gets its due job in the same transaction.
        const written = await db.transaction().execute(async (trx) => {
          const { numUpdatedRows } = await trx
            .updateTable(collection)
            .set({ ...values, updated_at: ctx.clock() } as never)
            .where('id', '=', row.id)
            .where('user_id', '=', row.user_id)
            .where('status', '=', row.status)
            .where('deleted_at', 'is', null)
            .executeTakeFirst();
          if (numUpdatedRows === 0n) return false;
          await scheduleIfDue(trx, row.id, row, {
            status: values.status ?? row.status,
            send_at: 'send_at' in values ? values.send_at : row.send_at,
          });
          return true;
        });
        const updated = written ? await resource.find(ctx, row.id) : undefined;
        if (updated) return resource.toApi(updated, ctx);
        if (attempt >= MAX_ATTEMPTS) throw concurrentChange();
      }
    },
  );

  app.get(
    `/${collection}/:id/deliveries`,
    {
      schema: {
        tags,
        summary: `List the deliveries of a ${lower}, one per recipient (filters are OR-combined)`,
        params: IdParams,
        querystring: searchQuery(DELIVERY_FILTERS),
        response: { 200: envelopeSchema(Delivery), ...errors },
      },
    },
    async (request) => {
      const { row } = await reachable(request.principal, request.params.id);
      const query = selectDeliveries(db, { kind: resource.kind, id: row.id, user_id: row.user_id });
      return searchPage(query, DELIVERY_FILTERS, request.query, request, ctx.config.publicUrl, 'd.id', toApiDelivery);
    },
  );

  app.delete(
    `/${collection}/:id`,
    {
      schema: { tags, summary: `Delete a ${lower} (a scheduled one is not sent)`, params: IdParams, response: { 200: Success, ...errors } },
    },
    async (request) => {
      for (let attempt = 1; ; attempt++) {
        const { row } = await reachable(request.principal, request.params.id);
        const refusal = deletionRefusal(row.status);
        if (refusal) throw validationError({ status: [refusal] });
        // Deleted rows are invisible to the sending engine, so a scheduled message is never sent; the
        // status condition keeps a message that has just started sending from being deleted.
        const { numUpdatedRows } = await db
          .updateTable(collection)
          .set({ deleted_at: ctx.clock() } as never)
          .where('id', '=', row.id)
          .where('user_id', '=', row.user_id)
          .where('status', '=', row.status)
          .where('deleted_at', 'is', null)
          .executeTakeFirst();
        if (numUpdatedRows > 0n) return { success: true };
        if (attempt >= MAX_ATTEMPTS) throw concurrentChange();
      }
    },
  );
}

/** The change counter of a user's messages in `collection`, kept by a trigger (db/migrations/0009). */
const versionRow = precompiled(2, (db, collection: string, userId: number) =>
  db.selectFrom('collection_versions').select('version').where('collection', '=', collection).where('user_id', '=', userId),
);

async function collectionVersion(db: Db, collection: string, userId: number): Promise<string> {
  const [row] = await versionRow(db, collection, userId);
  return String(row?.version ?? 0);
}

/** Tries of an update or delete whose message changed under it before the conflict is reported. */
const MAX_ATTEMPTS = 3;

function concurrentChange() {
  return validationError({ status: ['changed while the request was processed; read the message and try again'] });
}

/** True when every column of `values` already holds that value in `row`. */
function isUnchanged(row: object, values: Record<string, unknown>): boolean {
  const stored = row as Record<string, unknown>;
  return Object.entries(values).every(([column, value]) => sameValue(stored[column], value));
}

function sameValue(stored: unknown, next: unknown): boolean {
  if (stored instanceof Date && next instanceof Date) return stored.getTime() === next.getTime();
  // jsonb columns are written as JSON text and read back parsed.
  if (typeof next === 'string' && typeof stored === 'object' && stored !== null) return isDeepStrictEqual(stored, JSON.parse(next));
  return stored === next;
}
