import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { MessageKind } from '../db/schema.ts';

/**
 * The reporting object of a message and the counters behind it (`message_counters`, one row per
 * message and shard): every statement on that table is here, most of them as parts of the
 * statements that move a delivery, so that a counter changes in the same statement as what it
 * counts (sending/deliveries.ts, sending/delivery-events.ts).
 */

/** The fourteen delivery counters of the specification's reporting object, in its order. */
export const COUNTERS = [
  'sent',
  'processed',
  'delivered',
  'open',
  'click',
  'reply',
  'spamreport',
  'unsubscribe',
  'deferred',
  'dropped',
  'bounce',
  'hard_bounce',
  'soft_bounce',
  'failed',
] as const;
export type Counter = (typeof COUNTERS)[number];
export type Reporting = { date: null } & Record<Counter, number>;

/** The reporting of a message nothing has happened to yet (a new one). */
export function emptyReporting(): Reporting {
  const reporting = { date: null } as Reporting;
  for (const name of COUNTERS) reporting[name] = 0;
  return reporting;
}

/** Counter rows per message: concurrent writers mostly hit different rows. */
export const COUNTER_SHARDS = 16;

/** A message's counters summed over their shards, as a sub-select for a lateral join (one index range per message). */
export function summedCounters(kind: MessageKind, messageId: string): RawBuilder<Record<Counter, number>> {
  return sql<Record<Counter, number>>`(
    SELECT ${sql.join(COUNTERS.map((name) => sql`coalesce(sum(${sql.ref(`c.${name}`)}), 0) AS ${sql.ref(name)}`))}
    FROM message_counters c WHERE c.message_kind = ${kind} AND c.message_id = ${sql.ref(messageId)})`;
}

/**
 * `, counted AS (INSERT …)`: a CTE adding `increments` to the counters of each row the statement's
 * CTE `moved` returns (`id, user_id, message_kind, message_id` of a delivery), in the shard the
 * delivery's id picks.
 */
export function countMoved(increments: readonly (readonly [Counter, number])[]): RawBuilder<unknown> {
  const columns = increments.map(([name]) => sql.ref(name));
  const values = increments.map(([, n]) => sql`${n}::integer`);
  const updates = increments.map(([name]) => sql`${sql.ref(name)} = message_counters.${sql.ref(name)} + excluded.${sql.ref(name)}`);
  return sql`, counted AS (
      INSERT INTO message_counters (message_kind, message_id, shard, user_id, ${sql.join(columns)})
      SELECT message_kind, message_id, (id % ${COUNTER_SHARDS})::smallint, user_id, ${sql.join(values)} FROM moved
      ON CONFLICT (message_kind, message_id, shard) DO UPDATE SET ${sql.join(updates)}
    )`;
}

/** `, counted AS (INSERT …)`: the rows of the statement's CTE `moved` counted as `sent`, per message, in one shard. */
export function countMovedAsSent(shard: number): RawBuilder<unknown> {
  return sql`, counted AS (
      INSERT INTO message_counters (message_kind, message_id, shard, user_id, sent)
      SELECT message_kind, message_id, ${shard % COUNTER_SHARDS}::smallint, min(user_id), count(*)::integer
      FROM moved GROUP BY message_kind, message_id ORDER BY message_kind, message_id
      ON CONFLICT (message_kind, message_id, shard) DO UPDATE SET sent = message_counters.sent + excluded.sent
    )`;
}

/** What one batch adds to one message's counters, in one shard. */
export type CounterSums = { message_kind: string; message_id: number; shard: number; user_id: number } & Record<Counter, number>;

/** Adds sums to the counters in one statement, in (kind, message) order: two batches lock their counter rows in the same order. */
export async function addToCounters(db: Db, sums: readonly CounterSums[]): Promise<void> {
  if (sums.length === 0) return;
  const columns = COUNTERS.map((c) => sql.ref(c));
  const definitions = sql.raw(COUNTERS.map((c) => `${c} integer`).join(', '));
  const updates = COUNTERS.map((c) => sql`${sql.ref(c)} = message_counters.${sql.ref(c)} + excluded.${sql.ref(c)}`);
  const ordered = [...sums].sort((a, b) => a.message_kind.localeCompare(b.message_kind) || a.message_id - b.message_id);
  await sql`
    INSERT INTO message_counters (message_kind, message_id, shard, user_id, ${sql.join(columns)})
    SELECT message_kind, message_id, shard, user_id, ${sql.join(columns)}
    FROM jsonb_to_recordset(${JSON.stringify(ordered)}::jsonb)
      AS x(message_kind text, message_id bigint, shard smallint, user_id bigint, ${definitions})
    ON CONFLICT (message_kind, message_id, shard) DO UPDATE SET ${sql.join(updates)}`.execute(db);
}

/**
 * What a user's messages that started sending since `since` came to, summed over their counters
 * (the brakes, sending/brakes.ts): `sent` accepted by the relay or the provider, `failed` refused
 * or given up, `spamreport` and `hard_bounce` as counted. One row per user (only `userId` when
 * given); users who sent nothing in the window have none.
 */
export interface SenderTotals {
  user_id: number;
  sent: number;
  failed: number;
  spamreport: number;
  hard_bounce: number;
}

export async function senderTotals(db: Db, since: Date, userId?: number): Promise<SenderTotals[]> {
  const mine = userId === undefined ? sql`` : sql`AND user_id = ${userId}`;
  const { rows } = await sql<Record<keyof SenderTotals, string>>`
    SELECT c.user_id, sum(c.sent) AS sent, sum(c.failed) AS failed, sum(c.spamreport) AS spamreport, sum(c.hard_bounce) AS hard_bounce
    FROM message_counters c
    WHERE (c.message_kind = 'templated_email' AND c.message_id IN (SELECT id FROM templated_emails WHERE sending_at >= ${since} ${mine}))
       OR (c.message_kind = 'voicemail_drop' AND c.message_id IN (SELECT id FROM voicemail_drops WHERE sending_at >= ${since} ${mine}))
    GROUP BY c.user_id
    ORDER BY c.user_id`.execute(db);
  return rows.map((r) => ({
    user_id: Number(r.user_id),
    sent: Number(r.sent),
    failed: Number(r.failed),
    spamreport: Number(r.spamreport),
    hard_bounce: Number(r.hard_bounce),
  }));
}
