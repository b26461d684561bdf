import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { validationError } from '../../errors.ts';
import type { App } from '../../http/fastify-types.ts';
import { checkBody } from '../../http/validation.ts';
import { RANK } from '../../identity/roles.ts';
import { fullName } from '../../identity/users.ts';
import { Id, StringEnum } from '../../json-schema.ts';
import { WEBHOOK_DELIVERY_STATES } from '../../webhooks/deliveries.ts';
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
  updateWebhookEndpoint,
  webhookDeliveryOf,
} from '../../webhooks/endpoints.ts';
import { ResendBody } from '../../webhooks/event-schemas.ts';
import { WEBHOOK_EVENT_TYPES } from '../../webhooks/events.ts';
import { tabData } from '../account-settings.ts';
import { setFlash, takeFlash } from '../flash.ts';
import { emptyForm, type Form, formValues, submitForm } from '../forms.ts';
import { PAGE_SCHEMA, sendPage } from '../render.ts';
import { refuseCancelled } from '../sessions.ts';
import { toSignIn, type Viewer } from '../viewer.ts';
import { instantOfLocal } from './compose-fields.ts';
import { type EndpointPageOptions, endpointPage, WEBHOOKS } from './webhook-endpoint.ts';

/**
 * `/account/settings/webhooks`: the Webhooks tab. The endpoints of the user the pages are for (as
 * `GET /v3/users/{id}/webhooks` lists them, team and service endpoints they made included), and
 * a new one registered: the form builds the body of `POST /v3/users/{id}/webhooks`, checks it
 * with the route's schema and saves it with the route's function, so a refused form shows the
 * API's messages. The secret is shown once, on the endpoint's page the form leads to (sealed on
 * the session until then, flash.ts). The endpoint's own pages are webhook-endpoint.ts.
 */
const CREATE_LABELS = { url: 'URL', events: 'Events', description: 'Description', scope: 'Whose events' } as const;

/** The posted values of a checkbox group: one value is a string, several an array. */
function listOf(value: unknown): string[] {
  const list = Array.isArray(value) ? value : value === undefined ? [] : [value];
  return [...new Set(list.filter((v): v is string => typeof v === 'string'))];
}

/** The scopes the signed-in user may give a new endpoint, as the API's rule (`teamOf`) allows them. */
function scopeChoices(viewer: Viewer): { value: string; label: string }[] {
  const name = fullName(viewer.owner);
  const choices = [{ value: 'user', label: `Only ${name}’s` }];
  if (viewer.principal.rank >= RANK['Team Administrator'] && viewer.owner.team_id !== null) {
    choices.push({ value: 'team', label: `Those of every member of ${name}’s team` });
  }
  if (viewer.principal.rank >= RANK.Administrator) choices.push({ value: 'service', label: 'Those of every user of the service' });
  return choices;
}

/** What a cancelled account may still do here (sessions.ts, refuseCancelled). */
const CANCELLED_MAY = 'read and delete its webhook endpoints, not change them';

async function sendList(reply: FastifyReply, ctx: AppContext, viewer: Viewer, o: { form?: Form; notice?: string }, status = 200) {
  const found = await searchWebhookEndpoints(ctx.database.db, viewer.owner.id, { per_page: 100 });
  const endpoints = found.rows.map(toApiWebhookEndpoint);
  return sendPage(
    reply,
    'webhooks/list',
    {
      title: 'Webhooks',
      ...tabData(viewer.session, 'webhooks', ctx.config),
      endpoints,
      form: o.form ?? emptyForm({ url: '', description: '', events: [], scope: 'user' }),
      notice: o.notice ?? null,
      eventTypes: WEBHOOK_EVENT_TYPES.map((type) => ({ value: type, label: type })),
      scopes: scopeChoices(viewer),
      ownerName: fullName(viewer.owner),
      actingForOther: viewer.owner.id !== viewer.session.user.id,
    },
    status,
  );
}

/** The API's body of a registration, from the form: the fields given, a description only when typed. */
function createBody(values: Record<string, string | string[]>) {
  const description = String(values.description ?? '');
  return {
    url: String(values.url ?? ''),
    events: listOf(values.events),
    ...(description ? { description } : {}),
    ...(values.scope ? { scope: values.scope } : {}),
  };
}

function listRoutes(web: App, ctx: AppContext): void {
  const { db } = ctx.database;

  web.get(WEBHOOKS, { schema: PAGE_SCHEMA }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const { notice } = await takeFlash(db, viewer.session, ctx.clock());
    return sendList(reply, ctx, viewer, { notice });
  });

  web.post(WEBHOOKS, { schema: PAGE_SCHEMA }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    refuseCancelled(viewer.session, CANCELLED_MAY);
    const body = (request.body ?? {}) as Record<string, unknown>;
    const values = { ...formValues(body, ['url', 'description', 'scope']), events: listOf(body.events) };
    const creator = { rank: viewer.principal.rank, teamId: viewer.principal.teamId };
    const outcome = await submitForm(values, CREATE_LABELS, async () => {
      const apiBody = createBody(values);
      checkBody(CreateWebhookBody, apiBody);
      // Checked against the route's schema just above: its scope is one of the three.
      const checked = apiBody as Parameters<typeof createWebhookEndpoint>[3];
      return createWebhookEndpoint(db, viewer.owner, creator, checked, ctx.config.webhooks, ctx.clock());
    });
    if (!outcome.ok) return sendList(reply, ctx, viewer, { form: outcome.form }, 422);
    const row = outcome.result;
    request.log.info({ userId: viewer.session.user.id, endpointId: row.id }, 'webhook endpoint registered from the web');
    await setFlash(db, viewer.session, { newSecret: { endpointId: row.id, secret: row.secret } }, ctx.clock());
    return reply.redirect(`${WEBHOOKS}/${row.id}`, 303);
  });
}

const EndpointParams = Type.Object({ id: Id });
const DeliveryParams = Type.Object({ id: Id, delivery_id: Id });
const EndpointQuery = Type.Object({
  before: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
  state: Type.Optional(StringEnum(WEBHOOK_DELIVERY_STATES)),
});
const RESEND_LABELS = { since: 'Since', until: 'Until', enabled: 'Not sent:' } as const;

/** The endpoint's page and what its buttons do: enable, disable, test, resend, delete. */
function endpointRoutes(web: App, ctx: AppContext): void {
  const { db } = ctx.database;
  const found = (viewer: Viewer, id: number) => reachableWebhookEndpoint(db, viewer.principal, id);
  const show = (reply: FastifyReply, viewer: Viewer, id: number, o: EndpointPageOptions, status = 200) =>
    found(viewer, id).then((endpoint) => endpointPage(reply, ctx, viewer, endpoint, o, status));

  web.get(`${WEBHOOKS}/:id`, { schema: { ...PAGE_SCHEMA, params: EndpointParams, querystring: EndpointQuery } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const endpoint = await found(viewer, request.params.id);
    const flash = await takeFlash(db, viewer.session, ctx.clock());
    const secret = flash.newSecret?.endpointId === endpoint.row.id ? flash.newSecret.secret : undefined;
    return endpointPage(reply, ctx, viewer, endpoint, { ...request.query, notice: flash.notice, secret, resendNext: flash.resendNext });
  });

  for (const [action, enabled] of [
    ['enable', true],
    ['disable', false],
  ] as const) {
    web.post(`${WEBHOOKS}/:id/${action}`, { schema: { ...PAGE_SCHEMA, params: EndpointParams } }, async (request, reply) => {
      const viewer = request.viewer;
      if (!viewer) return toSignIn(request, reply);
      refuseCancelled(viewer.session, CANCELLED_MAY);
      const { row } = await found(viewer, request.params.id);
      await updateWebhookEndpoint(db, row, { enabled }, ctx.config.webhooks, ctx.clock());
      const notice = enabled
        ? 'The endpoint is enabled: what was waiting for it is sent now.'
        : 'The endpoint is disabled: nothing is sent to it.';
      return noticeAndBack(reply, ctx, viewer, row.id, notice);
    });
  }

  web.post(`${WEBHOOKS}/:id/test`, { schema: { ...PAGE_SCHEMA, params: EndpointParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    refuseCancelled(viewer.session, CANCELLED_MAY);
    const { row } = await found(viewer, request.params.id);
    const outcome = await submitForm({}, RESEND_LABELS, () => queueTestEvent(db, row, ctx.clock()));
    if (!outcome.ok) return show(reply, viewer, row.id, { actionForm: outcome.form }, 422);
    return noticeAndBack(reply, ctx, viewer, row.id, `A test event was queued (delivery ${outcome.result}); it is listed below.`);
  });

  // A new secret, shown once as a new endpoint's is; the old one keeps signing alongside it for a day.
  web.post(`${WEBHOOKS}/:id/rotate`, { schema: { ...PAGE_SCHEMA, params: EndpointParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    refuseCancelled(viewer.session, CANCELLED_MAY);
    const { row } = await found(viewer, request.params.id);
    const rotated = await rotateWebhookSecret(db, row, ctx.clock());
    request.log.info({ userId: viewer.session.user.id, endpointId: row.id }, 'webhook secret rotated from the web');
    const notice =
      'A new secret signs the posts from now on; the old one signs beside it for 24 hours, while your receiver moves to the new one.';
    return noticeAndBack(reply, ctx, viewer, row.id, notice, { newSecret: { endpointId: row.id, secret: rotated.secret } });
  });

  resendRoutes(web, ctx, found, show);
  deleteRoutes(web, ctx, found);
}

/** Says `notice` once, on the endpoint's page the redirect leads to. */
async function noticeAndBack(reply: FastifyReply, ctx: AppContext, viewer: Viewer, id: number, notice: string, extra = {}) {
  await setFlash(ctx.database.db, viewer.session, { notice, ...extra }, ctx.clock());
  return reply.redirect(`${WEBHOOKS}/${id}`, 303);
}

type Found = (viewer: Viewer, id: number) => ReturnType<typeof reachableWebhookEndpoint>;
type Show = (reply: FastifyReply, viewer: Viewer, id: number, o: EndpointPageOptions, status?: number) => Promise<FastifyReply>;

/** Resend one delivery's event, or every event since a time (a page of 1,000 at most, as the API's). */
function resendRoutes(web: App, ctx: AppContext, found: Found, show: Show): void {
  const { db } = ctx.database;
  const limits = () => ({ perHour: ctx.config.webhooks.resendPerHour, now: ctx.clock() });

  web.post(
    `${WEBHOOKS}/:id/deliveries/:delivery_id/resend`,
    { schema: { ...PAGE_SCHEMA, params: DeliveryParams } },
    async (request, reply) => {
      const viewer = request.viewer;
      if (!viewer) return toSignIn(request, reply);
      refuseCancelled(viewer.session, CANCELLED_MAY);
      const { row, owner } = await found(viewer, request.params.id);
      // The delivery as GET …/deliveries/{delivery_id} shows it to this principal (404 otherwise): its event.
      const delivery = await webhookDeliveryOf(db, row, request.params.delivery_id, viewer.principal);
      const outcome = await submitForm({}, RESEND_LABELS, () =>
        resendToEndpoint(db, row, owner, { event_id: delivery.event_id }, limits()),
      );
      if (!outcome.ok) return show(reply, viewer, row.id, { actionForm: outcome.form }, 422);
      return noticeAndBack(reply, ctx, viewer, row.id, `The ${delivery.event_type} event of delivery ${delivery.id} is queued again.`);
    },
  );

  web.post(`${WEBHOOKS}/:id/resend`, { schema: { ...PAGE_SCHEMA, params: EndpointParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    refuseCancelled(viewer.session, CANCELLED_MAY);
    const { row, owner } = await found(viewer, request.params.id);
    const body = (request.body ?? {}) as Record<string, unknown>;
    const values = formValues(body, ['since', 'until', 'next_since', 'after_event_id']);
    const timeZone = viewer.owner.time_zone;
    const outcome = await submitForm(values, RESEND_LABELS, async () => {
      // The next page of a resend carries the API's own `next_since` (an instant) and event id; a
      // first one, the times typed in the user's zone.
      const since = values.next_since || instantOfLocal(values.since ?? '', timeZone, 'since');
      if (!since) throw validationError({ since: ['must be a date and a time, such as 2026-07-12T16:56'] });
      const until = instantOfLocal(values.until ?? '', timeZone, 'until');
      const after = /^\d{1,15}$/.test(values.after_event_id ?? '') ? Number(values.after_event_id) : undefined;
      const apiBody = { since, ...(until ? { until } : {}), ...(after ? { after_event_id: after } : {}) };
      checkBody(ResendBody, apiBody);
      return resendToEndpoint(db, row, owner, apiBody, limits());
    });
    if (!outcome.ok) return show(reply, viewer, row.id, { resendForm: outcome.form }, 422);
    const { queued, next_since, next_after_event_id } = outcome.result;
    const more =
      next_since && next_after_event_id ? { since: next_since, afterEventId: next_after_event_id, until: values.until ?? '' } : undefined;
    const words = `${queued.toLocaleString('en-US')} ${queued === 1 ? 'event is' : 'events are'} queued again.`;
    return noticeAndBack(reply, ctx, viewer, row.id, more ? `${words} There are more: resend the next page below.` : words, {
      ...(more ? { resendNext: { endpointId: row.id, ...more } } : {}),
    });
  });
}

/** Delete: a confirmation page (a GET that changes nothing), then the POST. */
function deleteRoutes(web: App, ctx: AppContext, found: Found): void {
  const { db } = ctx.database;
  web.get(`${WEBHOOKS}/:id/delete`, { schema: { ...PAGE_SCHEMA, params: EndpointParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const { row } = await found(viewer, request.params.id);
    return sendPage(reply, 'webhooks/delete', {
      title: 'Delete this endpoint?',
      ...tabData(viewer.session, 'webhooks', ctx.config),
      endpoint: toApiWebhookEndpoint(row),
    });
  });

  web.post(`${WEBHOOKS}/:id/delete`, { schema: { ...PAGE_SCHEMA, params: EndpointParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const { row } = await found(viewer, request.params.id);
    await deleteWebhookEndpoint(db, row);
    request.log.info({ userId: viewer.session.user.id, endpointId: row.id }, 'webhook endpoint deleted from the web');
    await setFlash(db, viewer.session, { notice: `The endpoint ${row.url} was deleted with its deliveries.` }, ctx.clock());
    return reply.redirect(WEBHOOKS, 303);
  });
}

export async function webhookPages(web: App, ctx: AppContext): Promise<void> {
  listRoutes(web, ctx);
  endpointRoutes(web, ctx);
}
