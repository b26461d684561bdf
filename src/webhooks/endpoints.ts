import { sql } from 'kysely';
import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import { findOwnedRow, type UserRef } from '../db/owned-rows.ts';
import type { WebhookEndpointRow } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { DomainError, type FieldErrors, notFound, throwIfAny, validationError } from '../errors.ts';
import { type Principal, requireReachable } from '../identity/access.ts';
import { RANK, rankOf } from '../identity/roles.ts';
import { Id, Nullable, StringEnum, Timestamp, WritableBody } from '../json-schema.ts';
import { type UrlRules, urlProblem } from '../net/address-guard.ts';
import { formatTimestamp } from '../time.ts';
import { duePendingAgain, findWebhookDelivery, insertTestEvent, resendWebhookEvents } from './deliveries.ts';
import { WEBHOOK_EVENT_TYPES } from './events.ts';
import { newSecret } from './signing.ts';

/**
 * A user's webhook endpoints (docs/webhooks.md): where events go, which ones, and the secret that
 * signs them. The secret is shown once, when it is made (creation, rotation); a rotated secret's
 * predecessor keeps signing alongside it for `ROTATION_OVERLAP_MS`.
 */
const ROTATION_OVERLAP_MS = 24 * 3_600_000;
const MAX_ENDPOINTS_PER_USER = 50;

const SCOPES = ['user', 'team', 'service'] as const;
const Scope = StringEnum(SCOPES, {
  description:
    "Whose events it hears: `user` (its user's), `team` (every member of the user's team; made and managed by the team's Team Administrators) or `service` (every user's; Administrators)",
});

export const WebhookEndpoint = Type.Object({
  id: Id,
  user_id: { ...Id, description: 'The user it belongs to (for a team or service endpoint: who made it)' },
  scope: Scope,
  team_id: Nullable({ ...Id, description: 'For a team endpoint: the team whose members it hears' }),
  url: Type.String(),
  description: Nullable(Type.String()),
  events: Type.Array(StringEnum(WEBHOOK_EVENT_TYPES)),
  enabled: Type.Boolean(),
  disabled_reason: Nullable(Type.String({ description: 'Why Hopper disabled the endpoint (failing for too long); null when enabled' })),
  failing_since: Nullable(Timestamp),
  paused_until: Nullable({ ...Timestamp, description: 'It answered 429 or 503 with Retry-After: nothing is sent to it before this time' }),
  previous_secret_expires_at: Nullable(Timestamp),
  created_at: Timestamp,
  updated_at: Timestamp,
});

/** Creation and rotation answer with the secret, once. */
export const WebhookEndpointWithSecret = Type.Object({
  ...WebhookEndpoint.properties,
  secret: Type.String({ description: 'whsec_… — shown only now; verify signatures with it' }),
});

const Fields = {
  url: Type.String({ minLength: 1, maxLength: 2048, description: 'https:// URL receiving the events' }),
  events: Type.Array(StringEnum(WEBHOOK_EVENT_TYPES), { minItems: 1, maxItems: WEBHOOK_EVENT_TYPES.length, uniqueItems: true }),
  description: Nullable(Type.String({ maxLength: 500 })),
  enabled: Type.Boolean(),
};
const READ_ONLY = [
  'id',
  'user_id',
  'disabled_reason',
  'failing_since',
  'paused_until',
  'previous_secret_expires_at',
  'created_at',
  'updated_at',
];

export const CreateWebhookBody = WritableBody(
  {
    url: Fields.url,
    events: Fields.events,
    description: Type.Optional(Fields.description),
    enabled: Type.Optional(Fields.enabled),
    scope: Type.Optional(Scope),
  },
  [...READ_ONLY, 'team_id'],
);
export const UpdateWebhookBody = WritableBody(Type.Partial(Type.Object(Fields)).properties, [...READ_ONLY, 'scope', 'team_id']);

type UpdateBody = { url?: string; events?: string[]; description?: string | null; enabled?: boolean };
type CreateBody = Required<Pick<UpdateBody, 'url' | 'events'>> & UpdateBody & { scope?: (typeof SCOPES)[number] };

/** Who asks for a new endpoint, and the user it will belong to. */
interface Creator {
  rank: number;
  teamId: number | null;
}

export const WEBHOOK_FILTERS: Filters = { id: { kind: 'id', column: 'id' }, url: { kind: 'text', column: 'url' } };

/**
 * The URL rules that can be checked when an endpoint is saved (net/address-guard.ts). Names are
 * resolved, and checked again, at every delivery (a name can change what it points at).
 */
function endpointUrlProblem(text: string, rules: UrlRules): string | undefined {
  return URL.canParse(text) ? urlProblem(new URL(text), rules) : 'must be an absolute URL';
}

export function toApiWebhookEndpoint(row: WebhookEndpointRow) {
  return {
    id: row.id,
    user_id: row.user_id,
    scope: row.scope,
    team_id: row.team_id,
    url: row.url,
    description: row.description,
    events: row.events as (typeof WEBHOOK_EVENT_TYPES)[number][],
    enabled: row.enabled,
    disabled_reason: row.disabled_reason,
    failing_since: formatTimestamp(row.failing_since),
    paused_until: formatTimestamp(row.paused_until),
    previous_secret_expires_at: formatTimestamp(row.previous_secret_expires_at),
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
  };
}

function checkFields(body: UpdateBody, rules: UrlRules): void {
  const errors: FieldErrors = {};
  if (body.url !== undefined) {
    const problem = endpointUrlProblem(body.url, rules);
    if (problem) errors.url = [problem];
  }
  throwIfAny(errors);
}

/**
 * A team endpoint hears the owner's team: made by a Team Administrator of that team (or an
 * Administrator) for a user of it; a service endpoint only by an Administrator. The owner must
 * hold the same rights, since an endpoint hears only what its owner may read (migration 0038):
 * one for a User would hear that User alone.
 */
function teamOf(scope: CreateBody['scope'], creator: Creator, owner: UserRef): number | null {
  if (scope === 'service' && creator.rank < RANK.Administrator) {
    throw new DomainError('forbidden', 'Only an Administrator may make a service-wide webhook endpoint.');
  }
  if (scope === 'service' && rankOf(owner.roles) < RANK.Administrator) {
    throw validationError({ scope: [`a service endpoint belongs to an Administrator; user ${owner.id} is not one`] });
  }
  if (scope !== 'team') return null;
  if (owner.team_id === null) throw validationError({ scope: ['the user is in no team'] });
  const ofTheTeam = creator.rank >= RANK.Administrator || (creator.rank >= RANK['Team Administrator'] && creator.teamId === owner.team_id);
  if (!ofTheTeam) throw new DomainError('forbidden', "Only the team's Team Administrators may make a team webhook endpoint.");
  if (rankOf(owner.roles) < RANK['Team Administrator']) {
    throw validationError({
      scope: [`a team endpoint belongs to a Team Administrator of the team or an Administrator; user ${owner.id} is neither`],
    });
  }
  return owner.team_id;
}

export async function createWebhookEndpoint(db: Db, owner: UserRef, creator: Creator, body: CreateBody, rules: UrlRules, now: Date) {
  checkFields(body, rules);
  const userId = owner.id;
  const teamId = teamOf(body.scope, creator, owner);
  const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM webhook_endpoints WHERE user_id = ${userId}`.execute(db);
  if (Number(rows[0]?.n ?? 0) >= MAX_ENDPOINTS_PER_USER) {
    throw validationError({ url: [`a user may have at most ${MAX_ENDPOINTS_PER_USER} webhook endpoints`] });
  }
  return db
    .insertInto('webhook_endpoints')
    .values({
      user_id: userId,
      url: body.url,
      events: body.events,
      description: body.description ?? null,
      enabled: body.enabled ?? true,
      scope: body.scope ?? 'user',
      team_id: teamId,
      secret: newSecret(),
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

function findWebhookEndpoint(db: Db, id: number) {
  return findOwnedRow(db, db.selectFrom('webhook_endpoints').selectAll().where('id', '=', id));
}

/**
 * The endpoint `id` with its owner, as `principal` may reach it (the access rule of every
 * `/v3/webhooks/{id}…` route and of the endpoint's pages): otherwise a 404, or a 403 for another's.
 */
export async function reachableWebhookEndpoint(db: Db, principal: Principal, id: number) {
  return requireReachable(principal, await findWebhookEndpoint(db, id), 'Webhook', id);
}

export async function searchWebhookEndpoints(db: Db, userId: number, params: SearchParams) {
  const query = db.selectFrom('webhook_endpoints').selectAll().where('user_id', '=', userId);
  return runSearch(query, WEBHOOK_FILTERS, params, 'id');
}

/** Applies the fields present. Enabling an endpoint again clears why it was disabled and its failing streak. */
export async function updateWebhookEndpoint(db: Db, endpoint: WebhookEndpointRow, body: UpdateBody, rules: UrlRules, now: Date) {
  checkFields(body, rules);
  const values: Record<string, unknown> = {};
  if (body.url !== undefined) values.url = body.url;
  if (body.events !== undefined) values.events = body.events;
  if (body.description !== undefined) values.description = body.description;
  if (body.enabled !== undefined) {
    values.enabled = body.enabled;
    if (body.enabled) Object.assign(values, { disabled_reason: null, failing_since: null, paused_until: null });
  }
  const row = await db
    .updateTable('webhook_endpoints')
    .set({ ...values, updated_at: now })
    .where('id', '=', endpoint.id)
    .where('user_id', '=', endpoint.user_id)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw notFound('Webhook', endpoint.id);
  // Enabled again: what was waiting for it is sent now, its retry window started anew.
  if (body.enabled && !endpoint.enabled) await duePendingAgain(db, endpoint.id, now);
  return row;
}

/** Deletes the endpoint with its pending and past deliveries. */
export async function deleteWebhookEndpoint(db: Db, endpoint: WebhookEndpointRow): Promise<void> {
  await db.deleteFrom('webhook_endpoints').where('id', '=', endpoint.id).where('user_id', '=', endpoint.user_id).execute();
}

/** A new secret; the current one keeps signing alongside it for a day. */
export async function rotateWebhookSecret(db: Db, endpoint: WebhookEndpointRow, now: Date) {
  const row = await db
    .updateTable('webhook_endpoints')
    .set((eb) => ({
      previous_secret: eb.ref('secret'),
      previous_secret_expires_at: new Date(now.getTime() + ROTATION_OVERLAP_MS),
      secret: newSecret(),
      updated_at: now,
    }))
    .where('id', '=', endpoint.id)
    .where('user_id', '=', endpoint.user_id)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw notFound('Webhook', endpoint.id);
  return row;
}

/** Queues a `webhook.test` event for this endpoint alone (whatever it subscribes to). */
export async function queueTestEvent(db: Db, endpoint: WebhookEndpointRow, now: Date): Promise<number> {
  if (!endpoint.enabled) throw validationError({ enabled: ['the endpoint is disabled; enable it first'] });
  return insertTestEvent(db, endpoint, now);
}

/** Disabled endpoints, for /metrics. */
export async function countDisabledEndpoints(db: Db): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM webhook_endpoints WHERE NOT enabled`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

/** An endpoint by id, whoever owns it (the worker's read before each claim). */
export function findEndpointById(db: Db, id: number): Promise<WebhookEndpointRow | undefined> {
  return db.selectFrom('webhook_endpoints').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The endpoints with work due now: deliveries due, or claims a dead worker left behind. */
export async function endpointsWithDueWork(db: Db, now: Date): Promise<number[]> {
  const { rows } = await sql<{ id: number }>`
    SELECT e.id FROM webhook_endpoints e
    WHERE e.enabled AND (e.paused_until IS NULL OR e.paused_until <= ${now}) AND (
      EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending' AND d.next_attempt_at <= ${now})
      OR EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'sending' AND d.lease_until < ${now}))
    `.execute(db);
  return rows.map((r) => Number(r.id));
}

/**
 * Keeps an endpoint's failing streak: a success ends it; a round of failures starts it (or lets it
 * run on), and a streak older than `disableAfterMs` disables the endpoint with the reason.
 */
export async function noteEndpointHealth(
  db: Db,
  endpointId: number,
  round: { succeeded: boolean; lastError: string | null },
  now: Date,
  disableAfterMs: number,
): Promise<WebhookEndpointRow | undefined> {
  if (round.succeeded) {
    await sql`UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ${endpointId} AND failing_since IS NOT NULL`.execute(db);
    return undefined;
  }
  const cutoff = new Date(now.getTime() - disableAfterMs);
  const { rows } = await sql<{ enabled: boolean }>`
    UPDATE webhook_endpoints
    SET failing_since = COALESCE(failing_since, ${now}),
        enabled = CASE WHEN failing_since <= ${cutoff} THEN false ELSE enabled END,
        disabled_reason = CASE WHEN failing_since <= ${cutoff}
          THEN 'Disabled after failing since ' || to_char(failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || '; last error: ' || ${round.lastError ?? 'unknown'}
          ELSE disabled_reason END,
        updated_at = CASE WHEN failing_since <= ${cutoff} THEN ${now} ELSE updated_at END
    WHERE id = ${endpointId} AND enabled
    RETURNING enabled`.execute(db);
  // Disabled by this statement: it was enabled (the WHERE) and is not now.
  return rows.some((row) => !row.enabled) ? findEndpointById(db, endpointId) : undefined;
}

/** Disables an enabled endpoint at once (it answered 410 Gone); the row when this call disabled it. */
export async function disableEndpoint(db: Db, endpointId: number, reason: string, now: Date): Promise<WebhookEndpointRow | undefined> {
  return db
    .updateTable('webhook_endpoints')
    .set({ enabled: false, disabled_reason: reason, updated_at: now })
    .where('id', '=', endpointId)
    .where('enabled', '=', true)
    .returningAll()
    .executeTakeFirst();
}

/** Nothing is sent to the endpoint before `until` (a Retry-After); a later pause already set stays. */
export async function pauseEndpoint(db: Db, endpointId: number, until: Date): Promise<void> {
  await sql`
    UPDATE webhook_endpoints SET paused_until = GREATEST(COALESCE(paused_until, ${until}), ${until})
    WHERE id = ${endpointId}`.execute(db);
}

/** One of the endpoint's deliveries, with its attempts and what it posts, if `reader` may read its event's user. */
export async function webhookDeliveryOf(db: Db, endpoint: WebhookEndpointRow, deliveryId: number, reader: Principal) {
  const delivery = await findWebhookDelivery(db, endpoint, deliveryId, reader);
  if (!delivery) throw notFound('Webhook delivery', deliveryId);
  return delivery;
}

/**
 * `POST /v3/webhooks/{id}/resend`: one event, or a page of the events since a time (docs/webhooks.md,
 * "Recovery"), of the users the endpoint's maker (`maker`, its owner as it is now) may read, within
 * the maker's hourly allowance (`limits.perHour`).
 */
export async function resendToEndpoint(
  db: Db,
  endpoint: WebhookEndpointRow,
  maker: UserRef,
  body: { event_id?: number; since?: string; until?: string; after_event_id?: number },
  limits: { perHour: number; now: Date },
) {
  const errors: FieldErrors = {};
  if ((body.event_id === undefined) === (body.since === undefined)) errors.event_id = ['give either event_id or since'];
  if (body.until !== undefined && body.since === undefined) errors.until = ['needs since'];
  if (body.after_event_id !== undefined && body.since === undefined) errors.after_event_id = ['needs since (the next_since it came with)'];
  const since = body.since === undefined ? undefined : new Date(body.since);
  const until = body.until === undefined ? undefined : new Date(body.until);
  if (since && until && until <= since) errors.until = ['must be after since'];
  if (!endpoint.enabled) errors.enabled = ['the endpoint is disabled; enable it first (that resends what is pending)'];
  throwIfAny(errors);
  if (body.event_id !== undefined) {
    const result = await resendWebhookEvents(db, endpoint, maker, { eventId: body.event_id }, limits);
    if (result.queued === 0) throw notFound('Webhook event', body.event_id);
    return result;
  }
  return resendWebhookEvents(db, endpoint, maker, { since: since as Date, until, afterEventId: body.after_event_id }, limits);
}
