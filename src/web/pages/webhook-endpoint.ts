import type { FastifyReply } from 'fastify';
import type { AppContext } from '../../app-context.ts';
import type { UserRef } from '../../db/owned-rows.ts';
import type { WebhookEndpointRow } from '../../db/schema.ts';
import { recentWebhookDeliveries, type WEBHOOK_DELIVERY_STATES } from '../../webhooks/deliveries.ts';
import { toApiWebhookEndpoint } from '../../webhooks/endpoints.ts';
import { tabData } from '../account-settings.ts';
import { emptyForm, type Form } from '../forms.ts';
import { formatForUser, sendPage } from '../render.ts';
import type { Viewer } from '../viewer.ts';
import { localInput } from './compose-fields.ts';

/** The Webhooks tab of the account settings, and the root of its endpoints' pages. */
export const WEBHOOKS = '/account/settings/webhooks';
/** Deliveries an endpoint's page shows at once, newest first, paged back by keys (`?before=<delivery id>`). */
const PER_PAGE = 20;
/** How far back the resend form starts, by default. */
const DEFAULT_RESEND_MS = 3_600_000;

const STATE_WORDS: Record<DeliveryState, string> = {
  pending: 'Waiting',
  sending: 'Sending',
  delivered: 'Delivered',
  failed: 'Failed (given up)',
};
const SCOPE_WORDS: Record<string, string> = {
  user: 'Its owner’s events',
  team: 'Every member of the team',
  service: 'Every user of the service',
};

type DeliveryState = (typeof WEBHOOK_DELIVERY_STATES)[number];

export interface EndpointPageOptions {
  before?: number | undefined;
  state?: DeliveryState | undefined;
  notice?: string | undefined;
  /** A new endpoint's secret, shown this once. */
  secret?: string | undefined;
  resendNext?: { endpointId: number; since: string; afterEventId: number; until: string } | undefined;
  /** A refused button (Send test, Resend): its errors in the summary. */
  actionForm?: Form;
  /** A refused "Resend since" form, its values kept. */
  resendForm?: Form;
}

/** One delivery as the page shows it: the API's fields in words, each attempt a row. */
function deliveryView(d: Awaited<ReturnType<typeof recentWebhookDeliveries>>[number], timeZone: string | null) {
  const at = (iso: string | null) => (iso ? formatForUser(new Date(iso), timeZone) : '');
  return {
    id: d.id,
    webhookId: d.webhook_id,
    eventType: d.event_type,
    state: d.state,
    stateWords: STATE_WORDS[d.state],
    created: at(d.created_at),
    delivered: at(d.delivered_at),
    nextRetry: at(d.next_retry_at),
    lastError: d.last_error,
    attempts: d.attempt_log.map((a) => ({
      attempt: a.attempt,
      succeeded: a.response_status !== null && a.response_status >= 200 && a.response_status < 300,
      status: a.response_status,
      at: at(a.started_at),
      startedAt: a.started_at,
      duration: `${a.duration_ms.toLocaleString('en-US')} ms`,
      error: a.error,
      nextRetry: at(a.next_retry_at),
    })),
  };
}

/**
 * An endpoint's page: what it is and its state, its buttons (enable or disable, send a test,
 * delete), the recent deliveries — those of events whose user the viewer may read, as
 * `GET /v3/webhooks/{id}/deliveries` lists them — with every attempt, and the resend forms.
 */
export async function endpointPage(
  reply: FastifyReply,
  ctx: AppContext,
  viewer: Viewer,
  endpoint: { row: WebhookEndpointRow; owner: UserRef },
  o: EndpointPageOptions,
  status = 200,
) {
  const { row } = endpoint;
  const timeZone = viewer.owner.time_zone;
  const found = await recentWebhookDeliveries(ctx.database.db, row.id, viewer.principal, {
    before: o.before,
    state: o.state,
    limit: PER_PAGE + 1,
  });
  const shown = found.slice(0, PER_PAGE);
  const api = toApiWebhookEndpoint(row);
  const at = (date: Date | null) => formatForUser(date, timeZone);
  const here = `${WEBHOOKS}/${row.id}${o.state ? `?state=${o.state}` : ''}`;
  const resendNext = o.resendNext?.endpointId === row.id ? o.resendNext : undefined;
  const since = localInput(new Date(ctx.clock().getTime() - DEFAULT_RESEND_MS), timeZone);
  return sendPage(
    reply,
    'webhooks/endpoint',
    {
      title: `Webhook endpoint ${row.id}`,
      ...tabData(viewer.session, 'webhooks', ctx.config),
      endpoint: api,
      scopeWords: SCOPE_WORDS[row.scope] ?? row.scope,
      failingSince: at(row.failing_since),
      pausedUntil: at(row.paused_until),
      created: at(row.created_at),
      previousSecretEnds:
        row.previous_secret_expires_at && row.previous_secret_expires_at > ctx.clock() ? at(row.previous_secret_expires_at) : '',
      notice: o.notice ?? null,
      secret: o.secret ?? null,
      resendNext: resendNext ?? null,
      form: o.actionForm ?? o.resendForm ?? emptyForm(),
      resendForm: o.resendForm ?? emptyForm({ since, until: '' }),
      timeZone: timeZone ?? 'UTC',
      deliveries: shown.map((d) => deliveryView(d, timeZone)),
      states: Object.entries(STATE_WORDS).map(([value, label]) => ({ value, label })),
      state: o.state ?? '',
      newest: o.before !== undefined ? here : null,
      older: found.length > PER_PAGE ? `${here}${o.state ? '&' : '?'}before=${shown.at(-1)?.id}` : null,
    },
    status,
  );
}
