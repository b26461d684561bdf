import { type Insertable, type ShallowDehydrateObject, type SqlBool, sql } from 'kysely';
import { jsonBuildObject } from 'kysely/helpers/postgres';
import type { Db } from '../db/database.ts';
import type { UserRef } from '../db/owned-rows.ts';
import { precompiled, precompiledByShape, precompiledInsert } from '../db/precompiled.ts';
import type {
  MediaRow,
  MessageStatusColumn,
  TemplatedEmailRow,
  TemplatedEmailsTable,
  VoicemailDropRow,
  VoicemailDropsTable,
} from '../db/schema.ts';
import { type CountCache, type Filters, runSearch, type SearchParams, type SearchResult } from '../db/search.ts';
import { MESSAGE_KINDS, MESSAGE_TABLES, type MessageKind, type MessageRows } from './kinds.ts';
import { MESSAGE_STATUSES } from './lifecycle.ts';
import type { Counter, Reporting } from './reporting.ts';
import { summedCounters } from './reporting.ts';

/**
 * Every statement on the two message tables, `voicemail_drops` and `templated_emails`: the reads
 * (a message with its counters, its owner and, for a drop, its media item, in one query), the
 * search, the inserts, the checked updates and soft deletes of the API's writes (message-writes.ts),
 * the moves the sending engine makes on a message's own row (`Scheduled` → `Sending` when it is
 * due, the note that its recipients are resolved, `Sent` or `Failed` at the end), and the counts
 * `/metrics` shows. Each kind's module (`voicemail/drops.ts`, `email/templated-emails.ts`) holds
 * its shape and rules and calls these.
 */

/** A message as read: its row, its counters summed over their shards, and its owner (for the access rule). */
export interface MessageView<Row> {
  row: Row;
  reporting: Reporting;
  owner: UserRef;
}
/** A voicemail drop as read, with the media item it plays. */
export interface DropView extends MessageView<VoicemailDropRow> {
  media: MediaRow;
}
export type EmailView = MessageView<TemplatedEmailRow>;

// ── Reads ────────────────────────────────────────────────────────────────────────────────────

/**
 * The base query of every message read: the live row (alias `msg`) with, as JSON objects in the
 * same row, its counters summed over their shards (a lateral sub-select: one index range per
 * message) and its owner for the access rule. Reads by id and search pages both use it: one
 * query each. Nested JSON costs no more than flat prefixed columns taken apart in JavaScript
 * (docs/decisions.md, "Nested reads").
 */
function selectMessages<K extends MessageKind>(db: Db, kind: K) {
  return db
    .selectFrom(sql<MessageRows[K]>`${sql.table(MESSAGE_TABLES[kind])}`.as('msg'))
    .innerJoin('users as u', 'u.id', 'msg.user_id')
    .leftJoinLateral(summedCounters(kind, 'msg.id').as('r'), (join) => join.onTrue())
    .selectAll('msg')
    .select((eb) => [
      sql<Record<Counter, number>>`to_json(r)`.as('reporting'),
      jsonBuildObject({ team_id: eb.ref('u.team_id'), roles: eb.ref('u.roles') }).as('owner'),
    ])
    .where('msg.deleted_at', 'is', null)
    .where('u.deleted_at', 'is', null);
}

/** Drops with their media item (every drop has one), in the same one query. */
function selectDrops(db: Db) {
  return selectMessages(db, 'voicemail_drop')
    .innerJoin('media as m', 'm.id', 'msg.media_id')
    .select(sql<ShallowDehydrateObject<MediaRow>>`to_json(m)`.as('media'));
}

type Joined<K extends MessageKind> = Awaited<ReturnType<ReturnType<typeof selectMessages<K>>['executeTakeFirstOrThrow']>>;
type JoinedDrop = Awaited<ReturnType<ReturnType<typeof selectDrops>['executeTakeFirstOrThrow']>>;

/** The nested values of a joined row, as its message's view has them. */
function view<Row extends { user_id: number }>(row: Row, reporting: Record<Counter, number>, owner: Omit<UserRef, 'id'>): MessageView<Row> {
  return { row, reporting: { date: null, ...reporting }, owner: { id: row.user_id, ...owner } };
}

function toEmailView({ reporting, owner, ...row }: Joined<'templated_email'>): EmailView {
  return view<TemplatedEmailRow>(row, reporting, owner);
}

function toDropView({ reporting, owner, media, ...row }: JoinedDrop): DropView {
  return { ...view<VoicemailDropRow>(row, reporting, owner), media: mediaOfJson(media) };
}

/** A media item read as `to_json(m)`: JSON has no timestamps, so the item's come as text. */
function mediaOfJson(media: ShallowDehydrateObject<MediaRow>): MediaRow {
  const { created_at, updated_at, deleted_at } = media;
  return {
    ...media,
    created_at: new Date(created_at),
    updated_at: new Date(updated_at),
    deleted_at: deleted_at === null ? null : new Date(deleted_at),
  };
}

// The read of every GET, PUT and DELETE, and a search page's rows: compiled once, not per request.
const dropById = precompiled<[number], JoinedDrop>(1, (db, id) => selectDrops(db).where('msg.id', '=', id));
const dropsByIds = precompiled<[string], JoinedDrop>(1, (db, ids) => selectDrops(db).where(sql<SqlBool>`msg.id = any(${ids}::bigint[])`));
const emailById = precompiled<[number], Joined<'templated_email'>>(1, (db, id) =>
  selectMessages(db, 'templated_email').where('msg.id', '=', id),
);
const emailsByIds = precompiled<[string], Joined<'templated_email'>>(1, (db, ids) =>
  selectMessages(db, 'templated_email').where(sql<SqlBool>`msg.id = any(${ids}::bigint[])`),
);

/**
 * A page's ids as PostgreSQL's array text, `{12,15,40}`: pg writes a JavaScript array element by
 * element, escaping each as text (two regular expressions an id), 3.7 kB of a search's garbage.
 */
function idArray(ids: number[]): string {
  return `{${ids.join(',')}}`;
}

/** A live drop with its media, counters and owner; undefined when there is none or it was deleted. */
export async function findDrop(db: Db, id: number): Promise<DropView | undefined> {
  const [joined] = await dropById(db, id);
  return joined && toDropView(joined);
}

/** A live templated email with its counters and owner; undefined when there is none or it was deleted. */
export async function findEmail(db: Db, id: number): Promise<EmailView | undefined> {
  const [joined] = await emailById(db, id);
  return joined && toEmailView(joined);
}

/**
 * One page of one owner's messages of one kind. The page's ids and the total come from the
 * message table alone (the owner is known to be live, and every drop's media exists); the page's
 * rows are read by id with the kind's joined read. Totals are reused while the owner's messages
 * are unchanged (`totals`, see CountCache): the owner's change counter, kept by a trigger in
 * `collection_versions` (migration 0009), is read in the same statement; so are the counts of a
 * `status=…` filter, which the same trigger keeps (migration 0036).
 */
async function pageOf(
  db: Db,
  kind: MessageKind,
  ownerId: number,
  params: SearchParams,
  filters: Filters,
  totals: CountCache,
  rowsByIds: (ids: number[]) => Promise<object[]>,
): Promise<SearchResult<object>> {
  const table = MESSAGE_TABLES[kind];
  const live = db
    .selectFrom(sql`${sql.table(table)}`.as('msg'))
    .selectAll()
    .where(sql.ref('msg.deleted_at'), 'is', null);
  const version = sql<string | null>`(SELECT sum(version) FROM collection_versions WHERE collection = ${table} AND user_id = ${ownerId})`;
  // The owner's live messages in one status, kept beside the version (migration 0036).
  const kept = (name: string, value: unknown) =>
    name === 'status' && (MESSAGE_STATUSES as readonly unknown[]).includes(value)
      ? sql<string>`(SELECT coalesce(sum(${statusCount(value as MessageStatusColumn)}), 0) FROM collection_versions WHERE collection = ${table} AND user_id = ${ownerId})`
      : undefined;
  return runSearch<object>(live, filters, params, 'msg.id', {
    counts: { db, cache: totals, key: `${table} ${ownerId}`, version, kept },
    rowsByIds,
    owner: { column: 'msg.user_id', id: ownerId },
  });
}

/** One page of an owner's drops, filtered by `filters` (the kind's). */
export async function pageOfDrops(db: Db, ownerId: number, params: SearchParams, filters: Filters, totals: CountCache) {
  const page = await pageOf(db, 'voicemail_drop', ownerId, params, filters, totals, (ids) => dropsByIds(db, idArray(ids)));
  return { ...page, rows: page.rows.map((joined) => toDropView(joined as JoinedDrop)) };
}

/** One page of an owner's templated emails, filtered by `filters` (the kind's). */
export async function pageOfEmails(db: Db, ownerId: number, params: SearchParams, filters: Filters, totals: CountCache) {
  const page = await pageOf(db, 'templated_email', ownerId, params, filters, totals, (ids) => emailsByIds(db, idArray(ids)));
  return { ...page, rows: page.rows.map((joined) => toEmailView(joined as Joined<'templated_email'>)) };
}

/** Drops that will still play this media item (Scheduled or Sending), by id and name. */
export async function dropsPlayingMedia(db: Db, mediaId: number): Promise<{ id: number; name: string }[]> {
  const rows = await db
    .selectFrom('voicemail_drops')
    .select(['id', 'name'])
    .where('media_id', '=', mediaId)
    .where('status', 'in', ['Scheduled', 'Sending'])
    .where('deleted_at', 'is', null)
    .orderBy('id')
    .limit(20)
    .execute();
  return rows.map((r) => ({ id: Number(r.id), name: r.name }));
}

/**
 * Live messages of each kind by status, for `/metrics`: the counts the version trigger keeps
 * (migration 0036), a few rows per owner, instead of a scan of both message tables on every scrape.
 */
export async function countMessagesByStatus(db: Db): Promise<{ kind: MessageKind; status: MessageStatusColumn; n: number }[]> {
  const { rows } = await sql<Record<string, string>>`
    SELECT collection, ${sql.join(MESSAGE_STATUSES.map((status) => sql`sum(${statusCount(status)}) AS ${sql.id(status)}`))}
    FROM collection_versions WHERE collection IN (${sql.join(MESSAGE_KINDS.map((kind) => MESSAGE_TABLES[kind]))})
    GROUP BY collection`.execute(db);
  return MESSAGE_KINDS.flatMap((kind) => {
    const row = rows.find((r) => r.collection === MESSAGE_TABLES[kind]);
    return MESSAGE_STATUSES.map((status) => ({ kind, status, n: Number(row?.[status] ?? 0) }));
  });
}

/** The column of `collection_versions` that counts an owner's live messages in `status` (migration 0036). */
function statusCount(status: MessageStatusColumn) {
  return sql.ref(status.toLowerCase());
}

// ── The pages' summaries (web/pages/dashboard.ts) ───────────────────────────────────────────

/** What happened to an owner's messages sent on one day: their counters summed, by the day each started sending. */
interface DailyCounters {
  /** `YYYY-MM-DD` in the time zone asked for. */
  day: string;
  sent: number;
  delivered: number;
  reply: number;
  bounce: number;
  spamreport: number;
  unsubscribe: number;
}

/**
 * An owner's messages of both kinds that started sending since `since`, their counters summed by
 * the day (in `timeZone`) each started: a message's later replies and bounces count on its own
 * day, as listmonk counts a campaign's. Reads a few counter rows per message (16 shards), never
 * the deliveries.
 */
export async function dailyCounters(db: Db, ownerId: number, since: Date, timeZone: string): Promise<DailyCounters[]> {
  const sums = (['sent', 'delivered', 'reply', 'bounce', 'spamreport', 'unsubscribe'] as const).map(
    (name) => sql`coalesce(sum(c.${sql.ref(name)}), 0)::integer AS ${sql.ref(name)}`,
  );
  const started = MESSAGE_KINDS.map(
    (kind) => sql`SELECT ${kind}::text AS kind, id, sending_at FROM ${sql.table(MESSAGE_TABLES[kind])}
      WHERE user_id = ${ownerId} AND deleted_at IS NULL AND sending_at >= ${since}`,
  );
  const { rows } = await sql<DailyCounters>`
    SELECT to_char(m.sending_at AT TIME ZONE ${timeZone}, 'YYYY-MM-DD') AS day, ${sql.join(sums)}
    FROM (${sql.join(started, sql` UNION ALL `)}) m
    JOIN message_counters c ON c.message_kind = m.kind AND c.message_id = m.id
    GROUP BY 1 ORDER BY 1`.execute(db);
  return rows;
}

/** An owner's next scheduled messages of both kinds, soonest first. */
export async function scheduledNext(
  db: Db,
  ownerId: number,
  limit: number,
): Promise<{ kind: MessageKind; id: number; name: string; send_at: Date | null }[]> {
  const { rows } = await sql<{ kind: MessageKind; id: string | number; name: string; send_at: Date | null }>`
    SELECT * FROM (
      (SELECT 'templated_email' AS kind, id, subject AS name, send_at FROM templated_emails
        WHERE user_id = ${ownerId} AND status = 'Scheduled' AND deleted_at IS NULL ORDER BY send_at LIMIT ${limit})
      UNION ALL
      (SELECT 'voicemail_drop' AS kind, id, name, send_at FROM voicemail_drops
        WHERE user_id = ${ownerId} AND status = 'Scheduled' AND deleted_at IS NULL ORDER BY send_at LIMIT ${limit})
    ) s ORDER BY send_at NULLS FIRST, id LIMIT ${limit}`.execute(db);
  return rows.map((row) => ({ ...row, id: Number(row.id) }));
}

// ── The API's writes (message-writes.ts) ─────────────────────────────────────────────────────

/** The live message of an owner, of one kind, that has this external id (the holder a 409 names). */
export async function externalIdHolder(db: Db, kind: MessageKind, userId: number, externalId: string): Promise<number | undefined> {
  const row = await db
    .selectFrom(MESSAGE_TABLES[kind])
    .select('id')
    .where('user_id', '=', userId)
    .where('external_id', '=', externalId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return row?.id;
}

/** The external id and metadata of messages of one kind, by id, deleted or not: what their deliveries' events echo. */
export async function messageCorrelations(
  db: Db,
  kind: MessageKind,
  ids: readonly number[],
): Promise<Map<number, { external_id: string | null; metadata: Record<string, string> }>> {
  if (ids.length === 0) return new Map();
  const { rows } = await sql<{ id: string | number; external_id: string | null; metadata: Record<string, string> }>`
    SELECT id, external_id, metadata FROM ${sql.table(MESSAGE_TABLES[kind])} WHERE id = any(${[...ids]}::bigint[])`.execute(db);
  return new Map(rows.map((r) => [Number(r.id), { external_id: r.external_id, metadata: r.metadata ?? {} }]));
}

const dropInsert = precompiledInsert<VoicemailDropRow>((db, values) =>
  db
    .insertInto('voicemail_drops')
    .values(values as never)
    .returningAll(),
);
const emailInsert = precompiledInsert<TemplatedEmailRow>((db, values) =>
  db
    .insertInto('templated_emails')
    .values(values as never)
    .returningAll(),
);

export function insertDrop(db: Db, values: Insertable<VoicemailDropsTable>): Promise<VoicemailDropRow> {
  return dropInsert(db, values);
}

/**
 * What a new drop's media item must be for `insertDropPlaying` to insert the drop: one of the
 * owner's live items, of one of these types, and longer than `minSeconds` when its length is known
 * (voicemail/drops.ts decides; this is its statement).
 */
interface PlayableMedia {
  mediaId: number;
  ownerId: number;
  mimeTypes: readonly string[];
  minSeconds: number;
}

const dropPlayingInsert = precompiledByShape<VoicemailDropRow & { media: ShallowDehydrateObject<MediaRow> }>((db, values) => {
  const { gate_media, gate_owner, gate_types, gate_seconds, ...columns } = values;
  const names = Object.keys(columns);
  const statement = sql<VoicemailDropRow & { media: ShallowDehydrateObject<MediaRow> }>`
    WITH m AS (SELECT * FROM media WHERE id = ${gate_media} AND user_id = ${gate_owner} AND deleted_at IS NULL),
    d AS (
      INSERT INTO voicemail_drops (${sql.join(names.map((name) => sql.id(name)))})
      SELECT ${sql.join(names.map((name) => columns[name]))} FROM m
      WHERE m.mime_type = ANY(${gate_types}::text[]) AND (m.duration_seconds IS NULL OR m.duration_seconds > ${gate_seconds})
      RETURNING *)
    SELECT d.*, to_json(m) AS media FROM m LEFT JOIN d ON true`;
  return { compile: () => statement.compile(db) };
});

/**
 * A new drop and its media item in one statement (one round trip, where the item's check and the
 * insert were two): the drop is inserted only when the item is as `media` says it must be. Returns
 * the item (undefined when the owner has no such live item) and the drop (undefined when it was
 * not inserted), for the caller to say why.
 */
export async function insertDropPlaying(
  db: Db,
  values: Insertable<VoicemailDropsTable>,
  media: PlayableMedia,
): Promise<{ drop: VoicemailDropRow | undefined; media: MediaRow | undefined }> {
  const gate = { gate_media: media.mediaId, gate_owner: media.ownerId, gate_types: media.mimeTypes, gate_seconds: media.minSeconds };
  const [row] = await dropPlayingInsert(db, { ...values, ...gate });
  if (!row) return { drop: undefined, media: undefined };
  const { media: item, ...drop } = row;
  return { drop: drop.id === null ? undefined : drop, media: mediaOfJson(item) };
}

export function insertEmail(db: Db, values: Insertable<TemplatedEmailsTable>): Promise<TemplatedEmailRow> {
  return emailInsert(db, values);
}

/** The columns of a message a write is checked against: it applies only while the message still has them. */
export interface CheckedMessage {
  id: number;
  user_id: number;
  status: MessageStatusColumn;
  send_at: Date | null;
}

/** Writes `values` to a live message still in the status it was checked in; false when it moved on (or went). */
export async function updateCheckedMessage(db: Db, kind: MessageKind, row: CheckedMessage, values: object, now: Date): Promise<boolean> {
  const { numUpdatedRows } = await db
    .updateTable(MESSAGE_TABLES[kind])
    .set({ ...values, updated_at: now })
    .where('id', '=', row.id)
    .where('user_id', '=', row.user_id)
    .where('status', '=', row.status)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return numUpdatedRows > 0n;
}

/** Soft-deletes a live message still in the status it was checked in; false when it moved on (or went). */
export async function softDeleteMessage(db: Db, kind: MessageKind, row: CheckedMessage, now: Date): Promise<boolean> {
  const { numUpdatedRows } = await db
    .updateTable(MESSAGE_TABLES[kind])
    .set({ deleted_at: now })
    .where('id', '=', row.id)
    .where('user_id', '=', row.user_id)
    .where('status', '=', row.status)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return numUpdatedRows > 0n;
}

// ── The sending engine's moves ───────────────────────────────────────────────────────────────

/**
 * `Scheduled` → `Sending`, only if the message still has the send time its due job was made for
 * (a job left behind by a reschedule, an unschedule or a delete changes nothing). The row as it
 * now is, or undefined.
 */
export async function startSending<K extends MessageKind>(
  db: Db,
  kind: K,
  id: number,
  sendAt: Date,
  now: Date,
): Promise<MessageRows[K] | undefined> {
  const { rows } = await sql<MessageRows[K]>`
    UPDATE ${sql.table(MESSAGE_TABLES[kind])} SET status = 'Sending', sending_at = ${now}, updated_at = ${now}
    WHERE id = ${id} AND status = 'Scheduled' AND send_at = ${sendAt} AND deleted_at IS NULL
    RETURNING *`.execute(db);
  return rows[0];
}

/** The message's row, deleted or not (the engine decides what a deleted one means). */
export async function loadMessage<K extends MessageKind>(db: Db, kind: K, id: number): Promise<MessageRows[K] | undefined> {
  const { rows } = await sql<MessageRows[K]>`SELECT * FROM ${sql.table(MESSAGE_TABLES[kind])} WHERE id = ${id}`.execute(db);
  return rows[0];
}

/** The message's status now (undefined once it is gone): a running batch checks it for a cancel. */
export async function messageStatus(db: Db, kind: MessageKind, id: number): Promise<string | undefined> {
  const { rows } = await sql<{ status: string }>`SELECT status FROM ${sql.table(MESSAGE_TABLES[kind])} WHERE id = ${id}`.execute(db);
  return rows[0]?.status;
}

/** Notes that the message's recipients are resolved into deliveries. */
export async function markResolved(db: Db, kind: MessageKind, id: number, now: Date): Promise<void> {
  await sql`UPDATE ${sql.table(MESSAGE_TABLES[kind])} SET resolved_at = ${now} WHERE id = ${id}`.execute(db);
}

/** `Sent`, or `Failed` with a reason; only a message still `Sending` changes (once). True when it did. */
export async function finishSending(db: Db, kind: MessageKind, id: number, failure: string | null, now: Date): Promise<boolean> {
  const status = failure ? 'Failed' : 'Sent';
  const result = await sql`
    UPDATE ${sql.table(MESSAGE_TABLES[kind])} SET status = ${status}, reason = ${failure}, sent_at = ${now}, updated_at = ${now}
    WHERE id = ${id} AND status = 'Sending'`.execute(db);
  return Number(result.numAffectedRows ?? 0) > 0;
}

/** Every live message that is sending, of either kind. */
export async function sendingMessages(db: Db): Promise<{ kind: MessageKind; id: number }[]> {
  const found: { kind: MessageKind; id: number }[] = [];
  for (const kind of MESSAGE_KINDS) {
    const rows = await db
      .selectFrom(MESSAGE_TABLES[kind])
      .select('id')
      .where('status', '=', 'Sending')
      .where('deleted_at', 'is', null)
      .execute();
    for (const { id } of rows) found.push({ kind, id });
  }
  return found;
}

/** A user's live messages a sending pause held: scheduled and due by `now`, or sending. */
export async function heldMessagesOf(
  db: Db,
  userId: number,
  now: Date,
): Promise<{ kind: MessageKind; id: number; status: string; send_at: Date | null }[]> {
  const found: { kind: MessageKind; id: number; status: string; send_at: Date | null }[] = [];
  for (const kind of MESSAGE_KINDS) {
    const rows = await db
      .selectFrom(MESSAGE_TABLES[kind])
      .select(['id', 'status', 'send_at'])
      .where('user_id', '=', userId)
      .where('deleted_at', 'is', null)
      .where((eb) => eb.or([eb('status', '=', 'Sending'), eb.and([eb('status', '=', 'Scheduled'), eb('send_at', '<=', now)])]))
      .orderBy('id')
      .execute();
    for (const row of rows) found.push({ kind, ...row });
  }
  return found;
}
