import { expressionBuilder, sql } from 'kysely';
import { Type } from 'typebox';
import { toApiContact } from '../contacts/contacts.ts';
import { tagNamesByContact } from '../contacts/tags.ts';
import { channelOfSession } from '../db/channels.ts';
import { type Claim, claimRows, leaseEnd, released, stillClaimed } from '../db/claims.ts';
import type { Db } from '../db/database.ts';
import type { UserRef } from '../db/owned-rows.ts';
import type { ContactRow, Database, DeliveryRow, WebhookEndpointRow } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { toApiTemplatedEmail } from '../email/templated-emails.ts';
import { tooManyRequests } from '../errors.ts';
import { type Principal, reachableUsers, rightsOf } from '../identity/access.ts';
import { Id, Nullable, StringEnum, Timestamp } from '../json-schema.ts';
import { MESSAGE_KINDS } from '../messages/kinds.ts';
import { findDrop, findEmail, messageCorrelations } from '../messages/message-tables.ts';
import { type MessageCorrelation, toApiDelivery } from '../sending/delivery-listing.ts';
import { formatTimestamp } from '../time.ts';
import { toApiVoicemailDrop } from '../voicemail/drops.ts';
import { ENDPOINT_DISABLED_EVENT, TEST_EVENT, WEBHOOK_EVENT_TYPES } from './events.ts';
import { thinData } from './payload-size.ts';

/**
 * The webhook delivery ledger: one row per event and endpoint, claimed by a worker with a lease
 * (db/claims.ts, as message deliveries are), every attempt logged. An event's body is made once, the first time
 * any endpoint is sent it, and kept: retries carry the same bytes and the same `webhook-id`.
 */
export const WEBHOOK_DELIVERY_STATES = ['pending', 'sending', 'delivered', 'failed'] as const;

export const WebhookAttempt = Type.Object({
  attempt: Type.Integer(),
  started_at: Timestamp,
  duration_ms: Type.Integer(),
  response_status: Nullable(Type.Integer()),
  error: Nullable(Type.String()),
  next_retry_at: Nullable(Timestamp),
});

export const WebhookDelivery = Type.Object({
  id: Id,
  webhook_id: Type.String({ description: 'The `webhook-id` header: the same on every retry' }),
  event_type: Type.String(),
  state: StringEnum(WEBHOOK_DELIVERY_STATES),
  attempts: Type.Integer(),
  response_status: Nullable(Type.Integer({ description: 'Of the last attempt' })),
  last_error: Nullable(Type.String()),
  next_retry_at: Nullable(Timestamp),
  created_at: Timestamp,
  delivered_at: Nullable(Timestamp),
  attempt_log: Type.Array(WebhookAttempt),
});

/** One delivery, read alone: with the event's id and the exact body it posts. */
export const WebhookDeliveryDetail = Type.Object({
  ...WebhookDelivery.properties,
  event_id: Id,
  request: Type.Object(
    {
      method: Type.Literal('POST'),
      url: Type.String({ description: "The endpoint's URL" }),
      webhook_id: Type.String(),
      body: Nullable(Type.String({ description: 'The body posted, byte for byte (the signature covers it); null until first made' })),
    },
    { description: 'What each attempt posts (the signature headers are made per attempt)' },
  ),
});

export const WEBHOOK_DELIVERY_FILTERS: Filters = {
  id: { kind: 'id', column: 'd.id' },
  state: { kind: 'enum', column: 'state', values: WEBHOOK_DELIVERY_STATES },
};

/** The `webhook-id` of an event. */
export const webhookId = (uid: string) => `msg_${uid.replace(/-/g, '')}`;

/** An endpoint's deliveries of events whose user `reader` may read now (the access rule), with what a listing shows of their event. */
function readableDeliveries(db: Db, endpointId: number, reader: Principal) {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .select([
      'd.id',
      'd.state',
      'd.attempts',
      'd.last_status',
      'd.last_error',
      'd.next_attempt_at',
      'd.created_at',
      'd.delivered_at',
      'e.uid',
      'e.type',
    ])
    .where('d.endpoint_id', '=', endpointId)
    .where((eb) => eb('e.user_id', 'in', eb.selectFrom('users').select('users.id').where(reachableUsers(reader))));
}

type ListedRow = Awaited<ReturnType<ReturnType<typeof readableDeliveries>['execute']>>[number];

/** Deliveries as the API shows them: each with its attempts, read in one statement for them all. */
async function withAttempts(db: Db, found: readonly ListedRow[]) {
  const ids = found.map((r) => r.id);
  const attempts =
    ids.length === 0
      ? []
      : await db
          .selectFrom('webhook_attempts')
          .selectAll()
          .where('delivery_id', 'in', ids)
          .orderBy('delivery_id')
          .orderBy('attempt')
          .execute();
  return found.map((r) => ({
    id: r.id,
    webhook_id: webhookId(r.uid),
    event_type: r.type,
    state: r.state,
    attempts: r.attempts,
    response_status: r.last_status,
    last_error: r.last_error,
    next_retry_at: r.state === 'pending' ? formatTimestamp(r.next_attempt_at) : null,
    created_at: formatTimestamp(r.created_at),
    delivered_at: formatTimestamp(r.delivered_at),
    attempt_log: attempts
      .filter((a) => a.delivery_id === r.id)
      .map((a) => ({
        attempt: a.attempt,
        started_at: formatTimestamp(a.started_at),
        duration_ms: a.duration_ms,
        response_status: a.status,
        error: a.error,
        next_retry_at: formatTimestamp(a.next_retry_at),
      })),
  }));
}

/**
 * One page of an endpoint's deliveries in id order, as every listing, with their attempts: those
 * of events whose user `reader` may read now (the access rule), so that an endpoint's past
 * deliveries show its maker nothing it could not read directly.
 */
export async function searchWebhookDeliveries(db: Db, endpointId: number, params: SearchParams, reader: Principal) {
  const result = await runSearch(readableDeliveries(db, endpointId, reader), WEBHOOK_DELIVERY_FILTERS, params, 'd.id');
  return { ...result, rows: await withAttempts(db, result.rows) };
}

/**
 * The newest of an endpoint's deliveries that `reader` may read (as the listing above), before
 * the delivery `before` when given, in one state when given: an endpoint's page reads the recent
 * ones first and pages back by keys, never by an offset.
 */
export async function recentWebhookDeliveries(
  db: Db,
  endpointId: number,
  reader: Principal,
  o: { before?: number | undefined; state?: (typeof WEBHOOK_DELIVERY_STATES)[number] | undefined; limit: number },
) {
  let query = readableDeliveries(db, endpointId, reader);
  if (o.before !== undefined) query = query.where('d.id', '<', o.before);
  if (o.state !== undefined) query = query.where('d.state', '=', o.state);
  return withAttempts(db, await query.orderBy('d.id', 'desc').limit(o.limit).execute());
}

export interface ClaimedWebhook {
  id: number;
  attempts: number;
  created_at: Date;
  event_id: number;
  uid: string;
  type: string;
  resource: string;
  resource_id: number;
  user_id: number;
  occurred_at: Date;
  snapshot: Record<string, unknown>;
  payload: string | null;
}

/** Why a delivery was given up unsent: its event's user is no longer one the endpoint hears. */
const WITHHELD = "Not sent: the endpoint's maker may no longer read this user's events (their role or team changed since it was queued).";

/**
 * Claims up to `limit` of an endpoint's due deliveries for this worker, with a lease: oldest due
 * first, then claims a dead worker left behind (lease run out). Rows another worker holds are skipped.
 * A delivery whose event the endpoint no longer hears (`webhook_endpoints_for`, the maker's rights
 * now: migration 0038) is given up instead, unsent (`WITHHELD`); the events about the endpoint
 * itself (`webhook.test`, `endpoint.disabled`) are its maker's own.
 */
export async function claimWebhookDeliveries(db: Db, endpointId: number, limit: number, now: Date, leaseMs: number) {
  const lease = leaseEnd(now, leaseMs);
  const { rows } = await sql<ClaimedWebhook>`
    WITH endpoint AS (
      SELECT id FROM webhook_endpoints WHERE id = ${endpointId} AND enabled AND (paused_until IS NULL OR paused_until <= ${now})
    ), room AS (
      SELECT ${limit}::integer AS n FROM endpoint
    ), abandoned AS (
      SELECT id FROM webhook_deliveries
      WHERE endpoint_id = ${endpointId} AND state = 'sending' AND lease_until < ${now} AND EXISTS (SELECT 1 FROM room)
      LIMIT (SELECT n FROM room) FOR UPDATE SKIP LOCKED
    ), fresh AS (
      SELECT id FROM webhook_deliveries
      WHERE endpoint_id = ${endpointId} AND state = 'pending' AND next_attempt_at <= ${now} AND EXISTS (SELECT 1 FROM room)
      ORDER BY next_attempt_at, id
      LIMIT (SELECT n FROM room) FOR UPDATE SKIP LOCKED
    ), picked AS (
      SELECT id FROM (SELECT id FROM abandoned UNION ALL SELECT id FROM fresh) due ORDER BY id LIMIT (SELECT n FROM room)
    ), judged AS (
      SELECT p.id, e.resource = 'webhook' OR EXISTS (SELECT 1 FROM webhook_endpoints_for(e.user_id) w WHERE w.id = ${endpointId}) AS heard
      FROM picked p JOIN webhook_deliveries d ON d.id = p.id JOIN webhook_events e ON e.id = d.event_id
    ), claimed AS (
      UPDATE webhook_deliveries d
      SET state = CASE WHEN j.heard THEN 'sending' ELSE 'failed' END,
          attempts = CASE WHEN j.heard THEN d.attempts + 1 ELSE d.attempts END,
          lease_until = CASE WHEN j.heard THEN ${lease}::timestamptz END,
          next_attempt_at = CASE WHEN j.heard THEN d.next_attempt_at END,
          last_error = CASE WHEN j.heard THEN d.last_error ELSE ${WITHHELD} END,
          updated_at = ${now}
      FROM judged j WHERE d.id = j.id
      RETURNING d.id, d.attempts, d.created_at, d.event_id, j.heard
    )
    SELECT c.id, c.attempts, c.created_at, c.event_id, e.uid, e.type, e.resource, e.resource_id, e.user_id, e.occurred_at, e.snapshot, e.payload
    FROM claimed c JOIN webhook_events e ON e.id = c.event_id
    WHERE c.heard
    ORDER BY c.id`.execute(db);
  return rows.map((r) => ({ ...r, id: Number(r.id), event_id: Number(r.event_id), occurred_at: new Date(r.occurred_at) }));
}

/** Timestamps in a row snapshot (to_jsonb) come as text; the API shapes want Dates. */
function revive<T>(snapshot: Record<string, unknown>): T {
  const row: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(snapshot)) {
    row[key] = key.endsWith('_at') && typeof value === 'string' ? new Date(value) : value;
  }
  return row as T;
}

/**
 * The body of each claimed event that has none yet, made once and stored (`COALESCE` keeps the
 * first when two workers make one at once): `{type, timestamp, data}` with `data` the resource as
 * a read returns it. A message is read as it is now, with the status the event announces.
 */
export async function ensurePayloads(db: Db, claimed: ClaimedWebhook[], publicUrl: string): Promise<void> {
  const missing = claimed.filter((c) => c.payload === null);
  if (missing.length === 0) return;
  const made = new Map<number, string>();
  const contactTags = new Map<string, string[]>();
  const contacts = missing.filter((c) => c.resource === 'contact');
  for (const userId of new Set(contacts.map((c) => c.user_id))) {
    const ids = contacts.filter((c) => c.user_id === userId).map((c) => c.resource_id);
    for (const [id, names] of await tagNamesByContact(db, userId, ids)) contactTags.set(`${userId}:${id}`, names);
  }
  // What each delivery event's message carries for correlation (docs/webhooks.md, "Correlation"), read once per batch.
  const correlations = new Map<string, MessageCorrelation>();
  const deliveries = missing.filter((c) => c.resource === 'delivery');
  for (const kind of MESSAGE_KINDS) {
    const ids = deliveries.filter((c) => c.snapshot.message_kind === kind).map((c) => Number(c.snapshot.message_id));
    for (const [id, found] of await messageCorrelations(db, kind, [...new Set(ids)])) correlations.set(`${kind}:${id}`, found);
  }
  for (const event of missing) {
    if (made.has(event.event_id)) continue;
    const data = await eventData(db, event, contactTags, correlations, publicUrl);
    const envelope = { type: event.type, timestamp: event.occurred_at.toISOString(), user_id: event.user_id };
    const href = `${publicUrl}/v3/${RESOURCE_PATHS[event.resource] ?? ''}/${event.resource_id}`;
    const thin =
      event.resource in RESOURCE_PATHS && data && typeof data === 'object'
        ? thinData(event.resource, data as Record<string, unknown>, href, Buffer.byteLength(JSON.stringify(envelope)))
        : data;
    made.set(event.event_id, JSON.stringify({ ...envelope, data: thin }));
  }
  const ids = [...made.keys()];
  const { rows } = await sql<{ id: number; payload: string | null }>`
    UPDATE webhook_events e SET payload = COALESCE(e.payload, x.payload)
    FROM unnest(${ids}::bigint[], ${ids.map((id) => made.get(id))}::text[]) AS x(id, payload)
    WHERE e.id = x.id
    RETURNING e.id, CASE WHEN e.payload IS DISTINCT FROM x.payload THEN e.payload END AS payload`.execute(db);
  // Only a body another worker made first comes back (rare): it is the one to send.
  const stored = new Map(rows.filter((r) => r.payload !== null).map((r) => [Number(r.id), r.payload]));
  for (const event of missing) event.payload = stored.get(event.event_id) ?? made.get(event.event_id) ?? null;
}

/** Where each resource whose events may be thinned is read in the API. */
const RESOURCE_PATHS: Record<string, string> = {
  contact: 'contacts',
  templated_email: 'templated_emails',
  voicemail_drop: 'voicemail_drops',
};

async function eventData(
  db: Db,
  event: ClaimedWebhook,
  contactTags: Map<string, string[]>,
  correlations: Map<string, MessageCorrelation>,
  publicUrl: string,
): Promise<unknown> {
  const snapshot = event.snapshot;
  switch (event.resource) {
    case 'contact': {
      const { previous_status, ...row } = snapshot;
      const contact = toApiContact(revive<ContactRow>(row), contactTags.get(`${event.user_id}:${event.resource_id}`) ?? []);
      return previous_status === undefined ? contact : { ...contact, previous_status };
    }
    case 'delivery': {
      const { event: engagement, ...row } = snapshot as Record<string, unknown> & { event?: Record<string, unknown> };
      const delivery = revive<DeliveryRow>(row);
      return {
        ...toApiDelivery(delivery, correlations.get(`${delivery.message_kind}:${delivery.message_id}`)),
        user_id: delivery.user_id,
        message_kind: delivery.message_kind,
        message_id: delivery.message_id,
        ...(engagement
          ? {
              event: {
                type: engagement.type,
                detail: engagement.detail ?? null,
                occurred_at: formatTimestamp(new Date(String(engagement.occurred_at))),
              },
            }
          : {}),
      };
    }
    case 'voicemail_drop':
    case 'templated_email': {
      const status = snapshot.status;
      const id = event.resource_id;
      const read =
        event.resource === 'voicemail_drop'
          ? await findDrop(db, id).then((view) => view && toApiVoicemailDrop(view, publicUrl))
          : await findEmail(db, id).then((view) => view && toApiTemplatedEmail(view));
      if (read) return { ...read, status };
      const row = revive<Record<string, Date | unknown>>(snapshot);
      return { id, user_id: event.user_id, status, updated_at: formatTimestamp(row.updated_at as Date) };
    }
    default:
      return snapshot;
  }
}

export interface AttemptOutcome {
  id: number;
  attempts: number;
  startedAt: Date;
  durationMs: number;
  status: number | null;
  error: string | null;
  ok: boolean;
  /** When to try again; null when it succeeded or is given up. */
  nextAt: Date | null;
}

/**
 * A claim still held, written so that the planner finds the rows by their ids (the primary key)
 * and never through the partial index of claims: every delivery passes through `sending`, and a
 * bitmap scan of that index reads every entry left by rows that moved on since the last vacuum —
 * with a backlog of 100,000 events, each record statement read them all (a quadratic slowdown).
 */
const CURRENT_CLAIM = sql`(d.state || '') = 'sending'`;

/** Records a round of attempts in one statement: the deliveries' new states and the attempt log. Only current claims move. */
export async function recordWebhookAttempts(db: Db, outcomes: readonly AttemptOutcome[], now: Date): Promise<void> {
  if (outcomes.length === 0) return;
  const rows = outcomes.map((o) => ({
    id: o.id,
    attempts: o.attempts,
    started_at: o.startedAt.toISOString(),
    duration_ms: o.durationMs,
    status: o.status,
    error: o.error,
    state: o.ok ? 'delivered' : o.nextAt ? 'pending' : 'failed',
    next_at: o.nextAt?.toISOString() ?? null,
  }));
  await sql`
    WITH x AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
        AS x(id bigint, attempts integer, started_at timestamptz, duration_ms integer, status integer, error text, state text, next_at timestamptz)
    ), moved AS (
      UPDATE webhook_deliveries d
      SET state = x.state, next_attempt_at = x.next_at, lease_until = NULL, last_status = x.status, last_error = x.error,
          updated_at = ${now}, delivered_at = CASE WHEN x.state = 'delivered' THEN ${now}::timestamptz ELSE d.delivered_at END
      FROM x WHERE ${stillClaimed} AND ${CURRENT_CLAIM}
      RETURNING d.id
    )
    INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status, error, next_retry_at)
    SELECT x.id, x.attempts, x.started_at, x.duration_ms, x.status, x.error, x.next_at FROM x JOIN moved USING (id)`.execute(db);
}

/** Hands claims back unsent (the worker stops, or the endpoint looks down): due again at once, the attempt not counted. */
export async function releaseWebhookClaims(db: Db, claims: readonly Claim[], now: Date): Promise<void> {
  if (claims.length === 0) return;
  await sql`
    UPDATE webhook_deliveries d SET ${released('pending', now)}
    FROM ${claimRows(claims)}
    WHERE ${stillClaimed} AND ${CURRENT_CLAIM}`.execute(db);
}

/**
 * Deletes, `batch` at a time, the events older than `cutoff` with their deliveries and attempts
 * (WEBHOOK_RETENTION). An event one of whose deliveries is still due to an enabled endpoint, or
 * being sent, is kept until it is done. Returns how many events went.
 */
export async function pruneWebhookHistory(db: Db, cutoff: Date, batch = 5_000): Promise<number> {
  let deleted = 0;
  for (;;) {
    const { numAffectedRows } = await sql`
      DELETE FROM webhook_events WHERE id IN (
        SELECT e.id FROM webhook_events e
        WHERE e.occurred_at < ${cutoff}
          AND NOT EXISTS (
            SELECT 1 FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
            WHERE d.event_id = e.id AND (d.state = 'sending' OR (d.state = 'pending' AND w.enabled)))
        ORDER BY e.occurred_at, e.id
        LIMIT ${batch})`.execute(db);
    const n = Number(numAffectedRows ?? 0);
    deleted += n;
    if (n < batch) return deleted;
  }
}

/** A `webhook.test` event and its one delivery, to this endpoint alone (whatever it subscribes to); the delivery's id. */
export async function insertTestEvent(db: Db, endpoint: Pick<WebhookEndpointRow, 'id' | 'user_id'>, now: Date): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const event = await trx
      .insertInto('webhook_events')
      .values({
        user_id: endpoint.user_id,
        type: TEST_EVENT,
        resource: 'webhook',
        resource_id: endpoint.id,
        occurred_at: now,
        snapshot: JSON.stringify({ endpoint_id: endpoint.id, message: 'This is a test event from Hopper.' }),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const delivery = await trx
      .insertInto('webhook_deliveries')
      .values({ endpoint_id: endpoint.id, event_id: event.id, next_attempt_at: now, created_at: now, updated_at: now })
      .returning('id')
      .executeTakeFirstOrThrow();
    return delivery.id;
  });
}

/**
 * `endpoint.disabled`: an event about the endpoint (its API shape, `snapshot`) with a delivery to
 * each other enabled endpoint of its user, whatever they subscribe to (the Standard Webhooks
 * guidance: tell the owner by another channel). Nothing when the user has no other endpoint.
 */
export async function insertEndpointDisabledEvent(
  db: Db,
  endpoint: Pick<WebhookEndpointRow, 'id' | 'user_id'>,
  snapshot: Record<string, unknown>,
  now: Date,
): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    WITH others AS (
      SELECT id FROM webhook_endpoints WHERE user_id = ${endpoint.user_id} AND enabled AND id <> ${endpoint.id}
    ), event AS (
      INSERT INTO webhook_events (user_id, type, resource, resource_id, occurred_at, snapshot)
      SELECT ${endpoint.user_id}, ${ENDPOINT_DISABLED_EVENT}, 'webhook', ${endpoint.id}, ${now}, ${JSON.stringify(snapshot)}::jsonb
      WHERE EXISTS (SELECT 1 FROM others)
      RETURNING id
    ), queued AS (
      INSERT INTO webhook_deliveries (endpoint_id, event_id, next_attempt_at, created_at, updated_at)
      SELECT others.id, event.id, ${now}, ${now}, ${now} FROM others CROSS JOIN event
      RETURNING id
    )
    SELECT count(*) AS n FROM queued`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

/** Attempts by outcome (a 2xx answer, or not), for /metrics. */
export async function countWebhookAttempts(db: Db): Promise<{ delivered: boolean; n: number }[]> {
  const { rows } = await sql<{ ok: boolean; n: string }>`
    SELECT (status BETWEEN 200 AND 299) IS TRUE AS ok, count(*) AS n FROM webhook_attempts GROUP BY 1`.execute(db);
  return rows.map((row) => ({ delivered: row.ok, n: Number(row.n) }));
}

/**
 * For /metrics: the delay from each event to its delivery (p50, p99) over deliveries made in the
 * last five minutes, and the age of the oldest delivery still waiting for an enabled endpoint.
 */
export async function webhookLag(db: Db, now: Date): Promise<{ p50: number | null; p99: number | null; oldestPendingSeconds: number }> {
  const since = new Date(now.getTime() - 300_000);
  const { rows } = await sql<{ p50: number | null; p99: number | null; oldest: Date | string | null }>`
    SELECT
      (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.delivered_at - e.occurred_at))
         FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
         WHERE d.state = 'delivered' AND d.delivered_at >= ${since}) AS p50,
      (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM d.delivered_at - e.occurred_at))
         FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
         WHERE d.state = 'delivered' AND d.delivered_at >= ${since}) AS p99,
      (SELECT min(d.created_at) FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
         WHERE d.state IN ('pending', 'sending') AND w.enabled) AS oldest`.execute(db);
  const row = rows[0];
  const oldest = row?.oldest ? new Date(row.oldest) : undefined;
  return {
    p50: row?.p50 === null || row?.p50 === undefined ? null : Number(row.p50),
    p99: row?.p99 === null || row?.p99 === undefined ? null : Number(row.p99),
    oldestPendingSeconds: oldest ? Math.max(0, (now.getTime() - oldest.getTime()) / 1000) : 0,
  };
}

/** Deliveries waiting to be sent or retried, or being sent, for /metrics. */
export async function countWebhookDeliveriesPending(db: Db): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM webhook_deliveries WHERE state IN ('pending', 'sending')`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

/** What the events listing may filter on: `type` (repeatable); `since` and `until` are separate bounds. */
export const WEBHOOK_EVENT_FILTERS: Filters = {
  type: { kind: 'enum', column: 'type', values: [...WEBHOOK_EVENT_TYPES, TEST_EVENT, ENDPOINT_DISABLED_EVENT] },
};

/** A stored event as the events listing shows it: its ids, and its body as posted (made now if no endpoint was sent it yet). */
interface ListedWebhookEvent {
  id: number;
  webhook_id: string;
  type: string;
  timestamp: string;
  user_id: number;
  resource: string;
  resource_id: number;
  payload: { type: string; timestamp: string; user_id: number; data: unknown };
}

/**
 * One page of a user's stored events (those some endpoint was subscribed to when they happened),
 * oldest first, filtered by type and by time (`since` inclusive, `until` exclusive).
 */
export async function searchWebhookEvents(
  db: Db,
  userId: number,
  params: SearchParams & { since?: Date; until?: Date },
  publicUrl: string,
) {
  let query = db
    .selectFrom('webhook_events')
    .select(['id', 'uid', 'type', 'resource', 'resource_id', 'user_id', 'occurred_at', 'snapshot', 'payload'])
    .where('user_id', '=', userId);
  if (params.since) query = query.where('occurred_at', '>=', params.since);
  if (params.until) query = query.where('occurred_at', '<', params.until);
  const result = await runSearch(query, WEBHOOK_EVENT_FILTERS, params, 'id');
  const events: ClaimedWebhook[] = result.rows.map((r) => ({
    id: Number(r.id),
    attempts: 0,
    created_at: r.occurred_at,
    event_id: Number(r.id),
    uid: r.uid,
    type: r.type,
    resource: r.resource,
    resource_id: Number(r.resource_id),
    user_id: Number(r.user_id),
    occurred_at: r.occurred_at,
    snapshot: r.snapshot as Record<string, unknown>,
    payload: r.payload,
  }));
  await ensurePayloads(db, events, publicUrl);
  const rows: ListedWebhookEvent[] = events.map((e) => ({
    id: e.event_id,
    webhook_id: webhookId(e.uid),
    type: e.type,
    timestamp: e.occurred_at.toISOString(),
    user_id: e.user_id,
    resource: e.resource,
    resource_id: e.resource_id,
    payload: JSON.parse(e.payload ?? '{}'),
  }));
  return { ...result, rows };
}

/**
 * One delivery of an endpoint with its attempts and the body it posts; undefined if the endpoint
 * has no such delivery, or its event is of a user `reader` may not read.
 */
export async function findWebhookDelivery(db: Db, endpoint: Pick<WebhookEndpointRow, 'id' | 'url'>, deliveryId: number, reader: Principal) {
  const found = await searchWebhookDeliveries(db, endpoint.id, { page: 1, per_page: 1, id: [deliveryId] }, reader);
  const delivery = found.rows[0];
  if (!delivery) return undefined;
  const event = await db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .select(['e.id', 'e.payload'])
    .where('d.id', '=', deliveryId)
    .executeTakeFirstOrThrow();
  return {
    ...delivery,
    event_id: Number(event.id),
    request: { method: 'POST' as const, url: endpoint.url, webhook_id: delivery.webhook_id, body: event.payload },
  };
}

/**
 * Resends at most this many events per request (the answer says where to go on from): one page is
 * one statement, well within a request's statement timeout (DATABASE_TIMEOUT), where 10,000 were not.
 */
const RESEND_PAGE = 1_000;
const HOUR_MS = 3_600_000;

/** Which events a resend asks for: one, or a page of those since a time (after an event, to go on from a page). */
type ResendSelection = { eventId: number } | { since: Date; until?: Date | undefined; afterEventId?: number | undefined };

/** A page of a resend, and where the next one starts (both null when this was the last). */
interface ResendPage {
  queued: number;
  next_since: string | null;
  next_after_event_id: number | null;
}

/**
 * Queues events again for this endpoint, due now: one event (any type), or every event since a
 * time that the endpoint subscribes to — of the users it hears (its maker; its team's members;
 * everyone) whom its maker may read now (`maker`, as the access rule reads them: migration 0038
 * writes the same for the fan-out). A delivery it already has goes back to `pending` with its
 * retry window started anew (one being sent is left alone); an event it never had (it was
 * disabled, or subscribed later) gets a delivery.
 *
 * Oldest first, in (time, id) order, RESEND_PAGE at most: `next_since` and `next_after_event_id`
 * say where to go on from when there may be more (an event id, since a bulk change makes many
 * events of one timestamp). The maker's endpoints together are resent at most `perHour` events in
 * an hour (`webhook_resend_allowances`, the window starting at the first resend after the last
 * one ended): a page takes what is left of it, and a resend with nothing left is refused (429,
 * with when to retry). The allowance's row is locked until the page is queued, so a maker's
 * resends run one at a time.
 */
export async function resendWebhookEvents(
  db: Db,
  endpoint: Pick<WebhookEndpointRow, 'id' | 'user_id' | 'events' | 'scope' | 'team_id'>,
  maker: UserRef,
  which: ResendSelection,
  limits: { perHour: number; now: Date },
): Promise<ResendPage> {
  const { perHour, now } = limits;
  // A sub-select of the statement below (the users the endpoint hears), not a statement of its own.
  let users = expressionBuilder<Database>()
    .selectFrom('users')
    .select('id')
    .where(reachableUsers(rightsOf(maker)));
  if (endpoint.scope === 'user') users = users.where('id', '=', endpoint.user_id);
  if (endpoint.scope === 'team') users = users.where('team_id', '=', endpoint.team_id);
  const heard = sql`user_id IN (${users})`;
  return db.transaction().execute(async (trx) => {
    const { rows: allowances } = await sql<{ window_started_at: Date | string; resent: number }>`
      INSERT INTO webhook_resend_allowances AS a (user_id, window_started_at, resent) VALUES (${endpoint.user_id}, ${now}, 0)
      ON CONFLICT (user_id) DO UPDATE SET
        window_started_at = CASE WHEN a.window_started_at <= ${new Date(now.getTime() - HOUR_MS)} THEN ${now}::timestamptz ELSE a.window_started_at END,
        resent = CASE WHEN a.window_started_at <= ${new Date(now.getTime() - HOUR_MS)} THEN 0 ELSE a.resent END
      RETURNING window_started_at, resent`.execute(trx);
    const allowance = allowances[0] as { window_started_at: Date | string; resent: number };
    const left = perHour - allowance.resent;
    if (left <= 0) {
      const reopens = new Date(allowance.window_started_at).getTime() + HOUR_MS;
      throw tooManyRequests(
        `The endpoints of user ${endpoint.user_id} may be resent ${perHour.toLocaleString('en-US')} events an hour, and were; retry in ${Math.ceil((reopens - now.getTime()) / 1000)} s.`,
        (reopens - now.getTime()) / 1000,
      );
    }
    const limit = Math.min(RESEND_PAGE, left);
    const picked =
      'eventId' in which
        ? sql`SELECT id, occurred_at FROM webhook_events WHERE id = ${which.eventId} AND ${heard}`
        : sql`SELECT id, occurred_at FROM webhook_events
              WHERE ${heard} AND occurred_at >= ${which.since}
                ${which.until ? sql`AND occurred_at < ${which.until}` : sql``}
                ${
                  which.afterEventId === undefined
                    ? sql``
                    : sql`AND (occurred_at, id) > (COALESCE((SELECT e.occurred_at FROM webhook_events e WHERE e.id = ${which.afterEventId}), ${which.since}), ${which.afterEventId})`
                }
                AND type = ANY (${endpoint.events}::text[])
              ORDER BY occurred_at, id LIMIT ${limit}`;
    const { rows } = await sql<{ picked: string; queued: string; last_id: string | null; last_at: Date | string | null }>`
      WITH picked AS (${picked}), reset AS (
        UPDATE webhook_deliveries d
        SET state = 'pending', next_attempt_at = ${now}, created_at = ${now}, updated_at = ${now}, lease_until = NULL
        FROM picked p WHERE d.event_id = p.id AND d.endpoint_id = ${endpoint.id} AND d.state <> 'sending'
        RETURNING d.id
      ), added AS (
        INSERT INTO webhook_deliveries (endpoint_id, event_id, next_attempt_at, created_at, updated_at)
        SELECT ${endpoint.id}, p.id, ${now}, ${now}, ${now} FROM picked p
        WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = p.id AND d.endpoint_id = ${endpoint.id})
        ORDER BY p.occurred_at, p.id
        RETURNING id
      ), counted AS (
        SELECT (SELECT count(*) FROM reset) + (SELECT count(*) FROM added) AS queued
      ), charge AS (
        UPDATE webhook_resend_allowances SET resent = resent + (SELECT queued FROM counted) WHERE user_id = ${endpoint.user_id}
        RETURNING resent
      ), last AS (
        SELECT id, occurred_at FROM picked ORDER BY occurred_at DESC, id DESC LIMIT 1
      )
      SELECT (SELECT count(*) FROM picked) AS picked, (SELECT queued FROM counted) AS queued,
             (SELECT id FROM last) AS last_id, (SELECT occurred_at FROM last) AS last_at,
             pg_notify(${channelOfSession('hopper_webhooks')}, '')`.execute(trx);
    const row = rows[0];
    const more = !('eventId' in which) && Number(row?.picked ?? 0) >= limit && row?.last_id != null;
    return {
      queued: Number(row?.queued ?? 0),
      next_since: more && row?.last_at ? formatTimestamp(new Date(row.last_at)) : null,
      next_after_event_id: more ? Number(row?.last_id) : null,
    };
  });
}

/** An enabled endpoint's pending deliveries, due now with their retry window started anew (the endpoint was enabled again). */
export async function duePendingAgain(db: Db, endpointId: number, now: Date): Promise<void> {
  await sql`
    UPDATE webhook_deliveries SET next_attempt_at = ${now}, created_at = ${now}, updated_at = ${now}
    WHERE endpoint_id = ${endpointId} AND state = 'pending'`.execute(db);
}
