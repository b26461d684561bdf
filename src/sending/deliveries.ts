import { sql } from 'kysely';
import { type Claim, claimRows, leaseEnd, released, stillClaimed } from '../db/claims.ts';
import type { Db } from '../db/database.ts';
import type { ContactStatus, DeliveryFacts, DeliveryRow, DeliveryState, RecordedOutcome, StoredRecipient } from '../db/schema.ts';
import { runSearch, type SearchParams } from '../db/search.ts';
import type { MessageKind } from '../messages/kinds.ts';
import { COUNTERS, type Counter, countMoved, countMovedAsSent } from '../messages/reporting.ts';
import { formatTimestamp } from '../time.ts';
import { DELIVERY_FILTERS } from './delivery-listing.ts';
import {
  CLAIMABLE_STATES,
  DELIVERY_STATES,
  ENGINE_STATES,
  ERROR_STATES,
  FAILED_STATES,
  HANDED_OVER_STATES,
  PENDING_STATES,
  rankSql,
  stateList,
} from './delivery-states.ts';

/**
 * The delivery ledger: one row per message and contact (unique), moving through
 * queued → sending → sent (→ delivered, bounced, …) or deferred/held → … or failed/cancelled.
 * Every state change that a counter reflects updates that counter in the same statement, so the
 * reporting object is exactly the ledger, however the process dies.
 */

/** What resolving reads of a message: its owner, its recipients and (templated emails) its exclusions. */
interface ResolvableMessage {
  id: number;
  user_id: number;
  recipients: StoredRecipient[];
  exclusions?: StoredRecipient[];
}

const ids = (entries: StoredRecipient[] | undefined, group: StoredRecipient['group']) =>
  (entries ?? []).filter((e) => e.group === group).map((e) => e.value);

/**
 * Resolves the recipients of a message into deliveries, once: tags to their contacts, plus
 * contacts, minus exclusions, minus contacts that cannot receive (not Subscribed, or without an
 * email address / phone number for the channel); of contacts sharing an address, one receives and
 * the others are `skipped`. It walks the owner's contacts in id order, one
 * batch per statement, so the recipient list never sits in memory; a crash part-way is resumed
 * by running it again (the unique key makes re-inserting a no-op). Returns the number of
 * deliveries the message has (skipped ones not counted).
 */
export async function resolveDeliveries(
  db: Db,
  kind: MessageKind,
  message: ResolvableMessage,
  now: Date,
  batchSize = 5000,
): Promise<number> {
  const address = kind === 'templated_email' ? sql.ref('c.email') : sql.ref('c.phone');
  const tags = ids(message.recipients, 'Tags');
  const contacts = ids(message.recipients, 'Contacts');
  const excludedTags = ids(message.exclusions, 'Tags');
  const excludedContacts = ids(message.exclusions, 'Contacts');
  const taggedWith = (tagIds: number[]) =>
    sql`EXISTS (SELECT 1 FROM contact_tags ct WHERE ct.user_id = c.user_id AND ct.contact_id = c.id AND ct.tag_id = ANY (${tagIds}::bigint[]))`;

  const what = kind === 'templated_email' ? 'email address' : 'phone number';
  // A suppressed number is not called again: its contact gets a `skipped` delivery saying why
  // (docs/outcomes.md). An email address that no longer receives has a status other than Subscribed.
  const suppression = kind === 'voicemail_drop' ? sql.ref('c.phone_suppression') : sql`NULL::jsonb`;
  let cursor = 0;
  for (;;) {
    // One delivery per address: the first contact (by id) with an address gets it; any other
    // contact with the same address (any letter case) is recorded `skipped`, naming that contact.
    const result = await sql<{ last: string | null; n: string }>`
      WITH batch AS (
        SELECT c.id, ${address} AS address, ${suppression} AS suppression
        FROM contacts c
        WHERE c.user_id = ${message.user_id}
          AND c.id > ${cursor}
          AND c.deleted_at IS NULL
          AND c.status = 'Subscribed'
          AND ${address} IS NOT NULL
          AND (c.id = ANY (${contacts}::bigint[]) OR ${taggedWith(tags)})
          AND NOT (c.id = ANY (${excludedContacts}::bigint[]) OR ${taggedWith(excludedTags)})
        ORDER BY c.id
        LIMIT ${batchSize}
      ), taken AS (
        -- The addresses this batch reaches first (migration 0018). Its rows are not visible to the
        -- rest of this statement: below, an address claimed by an earlier batch is found by its key,
        -- and among this batch's contacts the first (by id) is the one that keeps it.
        INSERT INTO delivery_addresses (message_kind, message_id, address_key, contact_id)
        SELECT DISTINCT ON (lower(address)) ${kind}, ${message.id}, lower(address), id FROM batch
        WHERE suppression IS NULL
        ORDER BY lower(address), id
        ON CONFLICT DO NOTHING
      ), ranked AS (
        SELECT b.id, b.address, b.suppression,
               NULLIF(
                 coalesce(
                   (SELECT a.contact_id FROM delivery_addresses a
                    WHERE a.message_kind = ${kind} AND a.message_id = ${message.id} AND a.address_key = lower(b.address)),
                   first_value(b.id) OVER (PARTITION BY lower(b.address), b.suppression IS NULL ORDER BY b.id)
                 ),
                 b.id
               ) AS reached_by
        FROM batch b
      ), inserted AS (
        INSERT INTO deliveries (user_id, message_kind, message_id, contact_id, address, state, last_error, outcome, next_attempt_at, created_at, updated_at)
        SELECT ${message.user_id}, ${kind}, ${message.id}, r.id, r.address,
               CASE WHEN r.suppression IS NULL AND r.reached_by IS NULL THEN 'queued' ELSE 'skipped' END,
               CASE WHEN r.suppression IS NOT NULL
                      THEN ${`skipped: the ${what} is suppressed (`}::text || (r.suppression ->> 'reason')
                           || coalesce(' since ' || (r.suppression ->> 'at'), '') || ')'
                    WHEN r.reached_by IS NULL THEN NULL
                    ELSE ${`skipped: same ${what} as contact `}::text || r.reached_by::text || ', who gets this message' END,
               CASE WHEN r.suppression IS NOT NULL
                    THEN jsonb_build_object('classification', 'suppressed', 'permanent', true, 'code', r.suppression ->> 'reason',
                           'description', r.suppression ->> 'description', 'source', 'hopper', 'at', ${formatTimestamp(now)}::text)
               END,
               ${now}::timestamptz, ${now}::timestamptz, ${now}::timestamptz
        FROM ranked r
        ON CONFLICT (message_kind, message_id, contact_id) DO NOTHING
      )
      SELECT max(id) AS last, count(*) AS n FROM batch`.execute(db);
    const row = result.rows[0];
    if (!row || Number(row.n) < batchSize || row.last === null) break;
    cursor = Number(row.last);
  }
  const counted = await db
    .selectFrom('deliveries')
    .select(sql<string>`count(*)`.as('n'))
    .where('message_kind', '=', kind)
    .where('message_id', '=', message.id)
    .where('state', '<>', 'skipped')
    .executeTakeFirstOrThrow();
  return Number(counted.n);
}

/** A claimed delivery with the contact fields a channel needs to personalise and address it. */
export interface ClaimedDelivery extends DeliveryRow {
  first_name: string | null;
  last_name: string | null;
  time_zone: string | null;
  /** The contact's status now, not when the recipients were resolved: an opt-out wins over a pending retry. */
  contact_status: ContactStatus;
}

/**
 * Claims up to `limit` due deliveries of a message for this worker (the claim protocol of
 * db/claims.ts): their state becomes `sending` with a lease. Rows another worker holds are skipped
 * (SKIP LOCKED), so any number of workers share a message and each delivery is claimed by one. A
 * `sending` row whose lease ran out belonged to a worker that died mid-send; it is claimed again — the one place a message may
 * go out twice (at most once more, and only if the crash fell between the provider's acceptance
 * and our record of it: see docs/sending.md). With `takeOver` false only due deliveries are claimed;
 * `mine` are the claims this process holds itself (a renewal that came late does not make them abandoned).
 */
export async function claimDeliveries(
  db: Db,
  kind: MessageKind,
  messageId: number,
  limit: number,
  now: Date,
  leaseMs: number,
  takeOver = true,
  mine: readonly number[] = [],
) {
  const result = await sql<ClaimedDelivery>`
    WITH fresh AS (
      SELECT id FROM deliveries
      WHERE message_kind = ${kind} AND message_id = ${messageId}
        AND state IN (${stateList(CLAIMABLE_STATES)}) AND next_attempt_at <= ${now}
      ORDER BY next_attempt_at, id
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    ), abandoned AS (
      SELECT id FROM deliveries
      WHERE message_kind = ${kind} AND message_id = ${messageId}
        AND state = 'sending' AND lease_until < ${now} AND ${takeOver}
        AND NOT (id = ANY (${mine as number[]}::bigint[]))
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    ), claimed AS (
      UPDATE deliveries d
      SET state = 'sending', attempts = d.attempts + 1, lease_until = ${leaseEnd(now, leaseMs)}, updated_at = ${now}
      WHERE d.id IN (SELECT id FROM fresh UNION ALL SELECT id FROM abandoned)
      RETURNING d.*
    )
    SELECT claimed.*, c.first_name, c.last_name, c.time_zone, c.status AS contact_status
    FROM claimed JOIN contacts c ON c.id = claimed.contact_id
    ORDER BY claimed.id`.execute(db);
  return result.rows;
}

type CounterChanges = Partial<Record<Counter, number>>;

/**
 * Moves one delivery from one of `from` to `to`, setting `fields`, and adds `counters` to its
 * message's counters — one statement, so both happen or neither. With `delivery.attempts` the move
 * applies only while that claim is current. Returns false when the delivery was no longer in a
 * `from` state (someone else moved it), in which case nothing is counted.
 */
export async function transitionDelivery(
  db: Db,
  delivery: { id: number; attempts?: number },
  from: readonly DeliveryState[],
  to: DeliveryState,
  fields: {
    provider_message_id?: string | null;
    last_error?: string | null;
    next_attempt_at?: Date;
    sent_at?: Date;
    delivered_at?: Date;
    outcome?: RecordedOutcome;
  },
  counters: CounterChanges,
  now: Date,
): Promise<boolean> {
  const sets = [sql`state = ${to}`, sql`updated_at = ${now}`, sql`lease_until = NULL`];
  for (const [column, value] of Object.entries(fields)) {
    sets.push(column === 'outcome' ? sql`outcome = ${JSON.stringify(value)}::jsonb` : sql`${sql.ref(column)} = ${value}`);
  }
  const increments = (Object.entries(counters) as [Counter, number][]).filter(([name, n]) => COUNTERS.includes(name) && n);
  const fence = delivery.attempts === undefined ? sql`` : sql` AND attempts = ${delivery.attempts}`;
  const result = await sql<{ moved: string }>`
    WITH moved AS (
      UPDATE deliveries SET ${sql.join(sets)}
      WHERE id = ${delivery.id} AND state = ANY (${from}::text[])${fence}
      RETURNING id, user_id, message_kind, message_id
    )${increments.length > 0 ? countMoved(increments) : sql``}
    SELECT count(*) AS moved FROM moved`.execute(db);
  return Number(result.rows[0]?.moved ?? 0) > 0;
}

/**
 * Puts a claim back to wait until `next` (`deferred`), its attempt taken back (db/claims.ts): the
 * provider asked the whole sender to slow down, which is no fault of this delivery (a throttled
 * outcome, sending/channel.ts). Counted as `deferred` when the provider refused it (`counted`),
 * not when it was held back unsent. Only while the claim is current; returns whether it moved.
 */
export async function deferClaim(db: Db, claim: Claim, next: Date, error: string, counted: boolean, now: Date): Promise<boolean> {
  const result = await sql<{ moved: string }>`
    WITH moved AS (
      UPDATE deliveries d SET ${released('deferred', now)}, next_attempt_at = ${next}, last_error = ${error}
      WHERE d.id = ${claim.id} AND d.attempts = ${claim.attempts} AND d.state = 'sending'
      RETURNING d.id, d.user_id, d.message_kind, d.message_id
    )${counted ? countMoved([['deferred', 1]]) : sql``}
    SELECT count(*) AS moved FROM moved`.execute(db);
  return Number(result.rows[0]?.moved ?? 0) > 0;
}

/** The most outcomes recordSent writes as a VALUES list (one prepared statement text per count up to it). */
const MAX_VALUES_ROWS = 20;

export interface SentDelivery extends Claim {
  providerMessageId: string | null;
}

/**
 * Records many deliveries as handed over (`sending` → `sent`, counted as `sent`) in one statement:
 * the sending engine's hot path, one round trip per few dozen messages instead of one each. Only
 * claims still current move (see Claim); returns how many did. The count goes to one counter
 * shard, the caller's: concurrent recorders that each keep to their own shard never wait for one
 * another's row locks.
 */
export async function recordSent(db: Db, sent: readonly SentDelivery[], now: Date, shard = 0): Promise<number> {
  if (sent.length === 0) return 0;
  // The outcomes as a VALUES list, one statement text per count: PostgreSQL then knows how many
  // rows come and keeps one generic plan of each prepared text (docs/sending.md, "Delivery jobs,
  // claims and leases", has what arrays cost). Past MAX_VALUES_ROWS (not reached by the engine,
  // which records at most recordEvery at once), arrays.
  const handed =
    sent.length <= MAX_VALUES_ROWS
      ? sql`(VALUES ${sql.join(sent.map((s) => sql`(${s.id}::bigint, ${s.attempts}::integer, ${s.providerMessageId}::text)`))})`
      : sql`(SELECT * FROM unnest(${sent.map((s) => s.id)}::bigint[], ${sent.map((s) => s.attempts)}::integer[],
                                  ${sent.map((s) => s.providerMessageId)}::text[]))`;
  const result = await sql<{ moved: string }>`
    WITH handed AS (
      SELECT * FROM ${handed} AS x(id, attempts, provider_message_id)
    ), moved AS (
      UPDATE deliveries d
      SET state = 'sent', sent_at = ${now}, updated_at = ${now}, lease_until = NULL, last_error = NULL,
          provider_message_id = handed.provider_message_id
      FROM handed
      WHERE d.id = handed.id AND d.state = 'sending' AND d.attempts = handed.attempts
      RETURNING d.id, d.user_id, d.message_kind, d.message_id
    )${countMovedAsSent(shard)}
    SELECT count(*) AS moved FROM moved`.execute(db);
  return Number(result.rows[0]?.moved ?? 0);
}

/** Extends this worker's leases on claims it still holds; returns the ids that are still its own. */
export async function renewLeases(db: Db, claims: readonly Claim[], now: Date, leaseMs: number): Promise<Set<number>> {
  if (claims.length === 0) return new Set();
  // `d.id = ANY (ids)` pins the rows to the primary key: joined on unnest() alone, a table without
  // fresh statistics was planned as a scan of every delivery (79 ms a renewal on a fresh database).
  const ids = claims.map((c) => c.id);
  const { rows } = await sql<{ id: number }>`
    UPDATE deliveries d SET lease_until = ${leaseEnd(now, leaseMs)}
    FROM ${claimRows(claims)}
    WHERE d.id = ANY (${ids}::bigint[]) AND ${stillClaimed} AND d.state = 'sending'
    RETURNING d.id`.execute(db);
  return new Set(rows.map((r) => Number(r.id)));
}

/**
 * Gives back claims that were never handed to the provider: to the queue (a worker stopping; the
 * attempt did not happen, so it is not counted) or straight to `cancelled` (the message was).
 */
export async function releaseClaims(db: Db, claims: readonly Claim[], to: 'queued' | 'cancelled', now: Date): Promise<void> {
  if (claims.length === 0) return;
  const ids = claims.map((c) => c.id); // pinned to the primary key, as in renewLeases
  await sql`
    UPDATE deliveries d SET ${released(to, now, to === 'cancelled')}
    FROM ${claimRows(claims)}
    WHERE d.id = ANY (${ids}::bigint[]) AND ${stillClaimed} AND d.state = 'sending'`.execute(db);
}

interface DeliverySummary {
  total: number;
  pending: number;
  failed: number;
  /** When the earliest queued, deferred or held delivery may next be tried. */
  nextAttemptAt: Date | null;
  /** When the earliest claim still running runs out (a worker may have died holding it). */
  leaseUntil: Date | null;
}

export async function summarizeDeliveries(db: Db, kind: MessageKind, messageId: number): Promise<DeliverySummary> {
  const { rows } = await sql<{ total: string; pending: string; failed: string; next_at: Date | null; lease: Date | null }>`
    SELECT count(*) FILTER (WHERE state <> 'skipped') AS total,
           count(*) FILTER (WHERE state IN (${stateList(PENDING_STATES)})) AS pending,
           count(*) FILTER (WHERE state IN (${stateList(FAILED_STATES)})) AS failed,
           min(next_attempt_at) FILTER (WHERE state IN (${stateList(CLAIMABLE_STATES)})) AS next_at,
           min(lease_until) FILTER (WHERE state = 'sending') AS lease
    FROM deliveries WHERE message_kind = ${kind} AND message_id = ${messageId}`.execute(db);
  const row = rows[0];
  return {
    total: Number(row?.total ?? 0),
    pending: Number(row?.pending ?? 0),
    failed: Number(row?.failed ?? 0),
    nextAttemptAt: row?.next_at ? new Date(row.next_at) : null,
    leaseUntil: row?.lease ? new Date(row.lease) : null,
  };
}

/**
 * How far the sending of each message has come: its deliveries (skipped ones aside) and those
 * still pending, for the progress bars of the pages' lists. Counted from the (message, state, id)
 * index alone; asked only for the messages that are Sending.
 */
export async function deliveryProgress(db: Db, kind: MessageKind, messageIds: readonly number[]) {
  if (messageIds.length === 0) return new Map<number, { total: number; done: number }>();
  const { rows } = await sql<{ message_id: string | number; total: string; pending: string }>`
    SELECT message_id, count(*) FILTER (WHERE state <> 'skipped') AS total,
           count(*) FILTER (WHERE state IN (${stateList(PENDING_STATES)})) AS pending
    FROM deliveries WHERE message_kind = ${kind} AND message_id = ANY(${[...messageIds]}::bigint[])
    GROUP BY message_id`.execute(db);
  return new Map(rows.map((r) => [Number(r.message_id), { total: Number(r.total), done: Number(r.total) - Number(r.pending) }]));
}

/**
 * A cancelled message: what has not gone out yet never will. Claims a dead worker left behind
 * (lease run out) go too; live claims are released by the workers holding them.
 */
export async function cancelPendingDeliveries(db: Db, kind: MessageKind, messageId: number, now: Date): Promise<void> {
  await sql`
    UPDATE deliveries SET state = 'cancelled', updated_at = ${now}, lease_until = NULL
    WHERE message_kind = ${kind} AND message_id = ${messageId}
      AND (state IN (${stateList(CLAIMABLE_STATES)}) OR (state = 'sending' AND lease_until < ${now}))`.execute(db);
}

/** What each delivery says about where it went, for those of `ids` that exist. */
export async function findDeliveryFacts(db: Db, ids: readonly number[]): Promise<DeliveryFacts[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom('deliveries')
    .select(['id', 'user_id', 'message_kind', 'message_id', 'contact_id', 'address'])
    .where('id', 'in', ids)
    .execute();
}

/** One page of the deliveries of one message, filtered by `DELIVERY_FILTERS`. */
export function searchDeliveries(db: Db, kind: MessageKind, message: { id: number; user_id: number }, params: SearchParams) {
  const query = db
    .selectFrom('deliveries as d')
    .leftJoin('provider_submissions as s', 's.delivery_id', 'd.id')
    .select([
      'd.id',
      'd.contact_id',
      'd.address',
      'd.state',
      'd.attempts',
      'd.last_error',
      'd.outcome',
      'd.provider_message_id',
      'd.sent_at',
      'd.delivered_at',
      'd.created_at',
      'd.updated_at',
      'd.next_attempt_at',
      'd.message_kind',
      's.provider',
      's.result_at',
      's.next_check_at',
      's.proof_of_delivery_url',
    ])
    .where('d.user_id', '=', message.user_id)
    .where('d.message_kind', '=', kind)
    .where('d.message_id', '=', message.id);
  return runSearch(query, DELIVERY_FILTERS, params, 'd.id', {
    partitions: { db, column: 'd.state', values: DELIVERY_STATES, filter: 'state' },
  });
}

/** One recipient of a message as the report's table shows it: the delivery, with its contact's name. */
export interface RecipientRow {
  id: number;
  contact_id: number;
  address: string;
  state: DeliveryState;
  outcome: RecordedOutcome | null;
  last_error: string | null;
  updated_at: Date;
  first_name: string | null;
  last_name: string | null;
}

/**
 * The recipients of a message after delivery `afterId`, in id order, in one state or any: paged
 * by keys, never by OFFSET, so the 1,000th page of a 100,000-recipient send reads `limit` index
 * entries per state, like the first. One branch per state walks the (message, state, id) index
 * from `afterId` (there is no index in id order across the states: searchDeliveries says why).
 */
export async function recipientsAfter(
  db: Db,
  kind: MessageKind,
  messageId: number,
  options: { states: readonly DeliveryState[]; afterId: number; limit: number },
): Promise<RecipientRow[]> {
  const { states, afterId, limit } = options;
  const branches = states.map(
    (state) => sql`(SELECT id FROM deliveries WHERE message_kind = ${kind} AND message_id = ${messageId}
      AND state = ${sql.lit(state)} AND id > ${afterId} ORDER BY id LIMIT ${limit})`,
  );
  const { rows } = await sql<RecipientRow>`
    SELECT d.id, d.contact_id, d.address, d.state, d.outcome, d.last_error, d.updated_at, c.first_name, c.last_name
    FROM (SELECT id FROM (${sql.join(branches, sql` UNION ALL `)}) ids ORDER BY id LIMIT ${limit}) page
    JOIN deliveries d ON d.id = page.id
    LEFT JOIN contacts c ON c.id = d.contact_id
    ORDER BY d.id`.execute(db);
  return rows.map((row) => ({ ...row, id: Number(row.id), contact_id: Number(row.contact_id) }));
}

/**
 * A message's deliveries by the hour or day (`bucketSeconds`) they were sent and delivered, for
 * the report's timeline: two index-range aggregates over the message's deliveries.
 */
export async function deliveryTimeline(db: Db, kind: MessageKind, messageId: number, bucketSeconds: number) {
  const { rows } = await sql<{ what: 'sent' | 'delivered'; at: Date; n: string }>`
    SELECT what, to_timestamp(floor(extract(epoch FROM at) / ${bucketSeconds}) * ${bucketSeconds}) AS at, count(*) AS n
    FROM (
      SELECT 'sent' AS what, sent_at AS at FROM deliveries WHERE message_kind = ${kind} AND message_id = ${messageId} AND sent_at IS NOT NULL
      UNION ALL
      SELECT 'delivered', delivered_at FROM deliveries WHERE message_kind = ${kind} AND message_id = ${messageId} AND delivered_at IS NOT NULL
    ) t GROUP BY 1, 2 ORDER BY 2`.execute(db);
  return rows.map((row) => ({ what: row.what, at: new Date(row.at), n: Number(row.n) }));
}

/** A delivery by id, whatever its state; undefined when there is none. */
export async function findDelivery(db: Db, id: number): Promise<DeliveryRow | undefined> {
  return db.selectFrom('deliveries').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The status of the contact an email delivery went to; undefined when there is no such delivery. */
export async function recipientStatus(db: Db, deliveryId: number): Promise<ContactStatus | undefined> {
  const row = await db
    .selectFrom('deliveries as d')
    .innerJoin('contacts as c', 'c.id', 'd.contact_id')
    .select('c.status')
    .where('d.id', '=', deliveryId)
    .where('d.message_kind', '=', 'templated_email')
    .executeTakeFirst();
  return row?.status;
}

/** The templated email a delivery carried, with its contact's names and its signature, to compose it again; undefined when there is none. */
export async function findDeliveredEmail(db: Db, deliveryId: number) {
  return db
    .selectFrom('deliveries as d')
    .innerJoin('templated_emails as e', 'e.id', 'd.message_id')
    .innerJoin('contacts as c', 'c.id', 'd.contact_id')
    .leftJoin('signatures as s', (join) => join.onRef('s.id', '=', 'e.signature_id').onRef('s.user_id', '=', 'e.user_id'))
    .selectAll('e')
    .select(['c.first_name', 'c.last_name', 's.body as signature_body'])
    .where('d.id', '=', deliveryId)
    .where('d.message_kind', '=', 'templated_email')
    .executeTakeFirst();
}

/** A voicemail delivery as a provider's report is matched to it. */
interface VoicemailTarget {
  id: number;
  state: DeliveryState;
  address: string;
  provider_message_id: string | null;
}

/**
 * The voicemail deliveries of drops sent through `provider` that a batch of its reports names, by
 * its references (deliveries_provider_message_idx) or by Hopper's delivery ids (the primary key).
 */
export async function findVoicemailTargets(
  db: Db,
  provider: string,
  references: readonly string[],
  ids: readonly number[],
): Promise<VoicemailTarget[]> {
  const { rows } = await sql<VoicemailTarget>`
    SELECT d.id, d.state, d.address, d.provider_message_id
    FROM deliveries d JOIN voicemail_drops v ON v.id = d.message_id
    WHERE d.message_kind = 'voicemail_drop' AND v.provider = ${provider}
      AND (d.provider_message_id = ANY (${references}::text[]) OR d.id = ANY (${ids}::bigint[]))`.execute(db);
  return rows.map((row) => ({ ...row, id: Number(row.id) }));
}

/** A drop's deliveries handed over (or being handed over) to `provider` under an id of its own: what the provider may still hold. */
export async function handedOverVoicemails(
  db: Db,
  dropId: number,
  provider: string,
): Promise<{ deliveryId: number; providerMessageId: string; phone: string }[]> {
  const rows = await db
    .selectFrom('deliveries as d')
    .innerJoin('voicemail_drops as v', 'v.id', 'd.message_id')
    .select(['d.id', 'd.provider_message_id', 'd.address'])
    .where('d.message_kind', '=', 'voicemail_drop')
    .where('d.message_id', '=', dropId)
    .where('v.provider', '=', provider)
    .where('d.state', 'in', HANDED_OVER_STATES)
    .where('d.provider_message_id', 'is not', null)
    .orderBy('d.id')
    .execute();
  return rows.map((r) => ({ deliveryId: Number(r.id), providerMessageId: r.provider_message_id as string, phone: r.address }));
}

/** The rank of the state a delivery has now: later outcomes win over earlier ones, whatever order their events arrive in. */
const CURRENT_RANK = rankSql('d.state');
/** States an event does not move: the engine's own (it counts their outcome itself), and cancelled. */
const UNMOVED = stateList([...ENGINE_STATES, 'cancelled']);

/**
 * Moves deliveries to the states their events tell of, each only when it ranks above the state the
 * delivery has now, with the outcome that decided it (and, given, the failure's text as `last_error`); the rows are locked in id order (see recordDeliveryEvents). Answers the
 * deliveries moved, and those the sending engine still holds (queued, being handed over), which
 * events do not move.
 */
export async function raiseDeliveryStates(
  trx: Db,
  changes: readonly {
    id: number;
    state: DeliveryState;
    rank: number;
    at: string;
    outcome: RecordedOutcome | null;
    error?: string | null;
  }[],
  now: Date,
): Promise<{ moved: number[]; held: number[] }> {
  const { rows } = await sql<{ id: number; held: boolean }>`
    WITH x AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(changes)}::jsonb)
        AS x(id bigint, state text, rank integer, at timestamptz, outcome jsonb, error text)
    ), locked AS (
      SELECT d.id FROM deliveries d JOIN x ON x.id = d.id
      WHERE d.state NOT IN (${UNMOVED}) AND ${CURRENT_RANK} < x.rank
      ORDER BY d.id
      FOR NO KEY UPDATE OF d
    ), moved AS (
      UPDATE deliveries d
      SET state = x.state, updated_at = ${now}, delivered_at = CASE WHEN x.state = 'delivered' THEN x.at ELSE d.delivered_at END,
          outcome = coalesce(x.outcome, d.outcome), last_error = coalesce(x.error, d.last_error)
      FROM x JOIN locked USING (id)
      WHERE d.id = x.id AND d.state NOT IN (${UNMOVED}) AND ${CURRENT_RANK} < x.rank
      RETURNING d.id
    )
    SELECT id, false AS held FROM moved
    UNION ALL
    SELECT d.id, true FROM deliveries d JOIN x ON x.id = d.id WHERE d.state IN (${stateList(ENGINE_STATES)})`.execute(trx);
  return { moved: rows.filter((r) => !r.held).map((r) => Number(r.id)), held: rows.filter((r) => r.held).map((r) => Number(r.id)) };
}

/**
 * For each contact and time window: how many of its email deliveries bounced softly (ended
 * `bounced`, not permanently) within the window, by the time of their outcome.
 */
export async function countSoftBounces(
  trx: Db,
  windows: readonly { contact_id: number; since: string; until: string }[],
): Promise<Map<number, number>> {
  if (windows.length === 0) return new Map();
  const { rows } = await sql<{ contact_id: string; n: string }>`
    WITH w AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(windows)}::jsonb) AS w(contact_id bigint, since timestamptz, until timestamptz)
    )
    SELECT w.contact_id, count(*) AS n
    FROM w JOIN deliveries d ON d.contact_id = w.contact_id AND d.state = 'bounced'
    WHERE d.message_kind = 'templated_email'
      AND coalesce((d.outcome ->> 'permanent')::boolean, false) = false
      AND coalesce((d.outcome ->> 'at')::timestamptz, d.updated_at) > w.since
      AND coalesce((d.outcome ->> 'at')::timestamptz, d.updated_at) <= w.until
    GROUP BY w.contact_id`.execute(trx);
  return new Map(rows.map((r) => [Number(r.contact_id), Number(r.n)]));
}

/** Deliveries by kind and state, for /metrics. */
export async function countDeliveriesByState(db: Db): Promise<{ kind: MessageKind; state: DeliveryState; n: number }[]> {
  const { rows } = await sql<{ kind: MessageKind; state: DeliveryState; n: string }>`
    SELECT message_kind AS kind, state, count(*) AS n FROM deliveries GROUP BY 1, 2`.execute(db);
  return rows.map((row) => ({ ...row, n: Number(row.n) }));
}

/**
 * Deliveries that failed, bounced, were dropped or wait after a temporary failure, by kind, by who
 * said so (smtp, dsn, sendgrid, a voicemail provider, hopper) and by the outcome's class
 * (docs/outcomes.md), for /metrics: the providers' and the SMTP relay's errors by kind.
 */
export async function countDeliveryErrors(db: Db): Promise<{ kind: MessageKind; source: string; classification: string; n: number }[]> {
  const { rows } = await sql<{ kind: MessageKind; source: string; classification: string; n: string }>`
    SELECT message_kind AS kind,
           -- Without a recorded outcome, the channel's own hand-over said so: the SMTP relay, or the provider.
           COALESCE(outcome ->> 'source', CASE message_kind WHEN 'templated_email' THEN 'smtp' ELSE 'provider' END) AS source,
           COALESCE(outcome ->> 'classification', CASE state WHEN 'deferred' THEN 'deferred' ELSE 'unclassified' END) AS classification,
           count(*) AS n
    FROM deliveries WHERE state IN (${stateList(ERROR_STATES)}) GROUP BY 1, 2, 3`.execute(db);
  return rows.map((row) => ({ ...row, n: Number(row.n) }));
}

/** Deliveries handed over since `since`, by kind (the send rate, for /metrics). */
export async function countDeliveriesSentSince(db: Db, since: Date): Promise<{ kind: MessageKind; n: number }[]> {
  const { rows } = await sql<{ kind: MessageKind; n: string }>`
    SELECT message_kind AS kind, count(*) AS n FROM deliveries WHERE sent_at >= ${since} GROUP BY 1`.execute(db);
  return rows.map((row) => ({ ...row, n: Number(row.n) }));
}

/** One delivery to a contact, for the contact's history. */
interface ContactDelivery {
  id: number;
  message_kind: MessageKind;
  message_id: number;
  address: string;
  state: DeliveryState;
  outcome: RecordedOutcome | null;
  last_error: string | null;
  updated_at: Date;
}

/**
 * The newest deliveries to one contact of an owner, newest first: the contact's history. (No
 * index leads from the contact yet: each read filters the owner's deliveries.)
 */
export async function deliveriesToContact(db: Db, userId: number, contactId: number, limit: number): Promise<ContactDelivery[]> {
  const rows = await db
    .selectFrom('deliveries')
    .select(['id', 'message_kind', 'message_id', 'address', 'state', 'outcome', 'last_error', 'updated_at'])
    .where('user_id', '=', userId)
    .where('contact_id', '=', contactId)
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows as ContactDelivery[];
}
