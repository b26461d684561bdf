import { sql } from 'kysely';
import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import { findOwnedRow } from '../db/owned-rows.ts';
import type { InboundMessageKind, NewReply, ReplyAuthentication, ReplyRow } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { Id, Nullable, Timestamp } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';

/**
 * `GET /templated_emails/{id}/replies`: what contacts wrote back to a templated email, received by
 * the inbound mail receiver. Automatic replies (out of office, …) are kept and marked, but neither
 * counted in `reply` nor forwarded to the sender. Every statement on `inbound_messages` (each
 * message the receiver took, once per recipient address and Message-ID) and `replies` is here.
 */
export const Reply = Type.Object({
  id: Id,
  contact_id: Id,
  delivery_id: Id,
  from_address: Type.String(),
  from_name: Nullable(Type.String()),
  subject: Type.String(),
  text: Type.String({ description: 'The plain-text body (HTML-only replies converted to text)' }),
  auto_reply: Type.Boolean({
    description:
      'An automatic reply (RFC 3834 Auto-Submitted, Precedence, out-of-office), or any message that came to the bounce address: kept, never counted in reply nor forwarded',
  }),
  authentication: Nullable(
    Type.Object(
      {
        spf: Type.String({ description: 'pass, fail, softfail, neutral, none, temperror or permerror' }),
        dkim: Type.String({ description: 'pass when one signature verifies; else the first signature’s result, or none' }),
        dmarc: Type.String({ description: 'pass, fail (never forwarded), none (no policy), temperror or permerror' }),
        from_domain: Nullable(Type.String()),
        results: Type.String({ description: 'The Authentication-Results value (RFC 8601) the forward carries' }),
      },
      { description: 'SPF, DKIM and DMARC of the sender as the receiver found them; null for replies stored before Hopper checked' },
    ),
  ),
  held_reason: Nullable(
    Type.String({
      description:
        'Why the reply was not forwarded to the sender: dmarc_fail (its DMARC check failed: mail dressed as someone it is not, not counted as a reply either) or forward_limit (the reply address had reached INBOUND_FORWARDS_PER_DAY)',
    }),
  ),
  received_at: Timestamp,
});

export const REPLY_FILTERS: Filters = {
  contact_id: { kind: 'id', column: 'r.contact_id' },
  auto_reply: { kind: 'enum', column: 'r.auto_reply', values: ['true', 'false'] },
};

/** The columns a reply's API shape is made of. */
const LISTED = [
  'id',
  'contact_id',
  'delivery_id',
  'from_address',
  'from_name',
  'subject',
  'text',
  'auto_reply',
  'authentication',
  'held_reason',
  'received_at',
] as const;
type ListedReply = Pick<ReplyRow, (typeof LISTED)[number]>;

/** One page of the replies to one message, filtered by `REPLY_FILTERS`. */
export function searchReplies(db: Db, message: { id: number; user_id: number }, params: SearchParams) {
  const query = db
    .selectFrom('replies as r')
    .select(LISTED.map((column) => `r.${column}` as const))
    .where('r.user_id', '=', message.user_id)
    .where('r.message_kind', '=', 'templated_email')
    .where('r.message_id', '=', message.id);
  return runSearch(query, REPLY_FILTERS, params, 'r.id');
}

export function toApiReply(row: ListedReply) {
  return {
    id: row.id,
    contact_id: row.contact_id,
    delivery_id: row.delivery_id,
    from_address: row.from_address,
    from_name: row.from_name,
    subject: row.subject,
    text: row.text,
    auto_reply: row.auto_reply,
    authentication: row.authentication && toApiAuthentication(row.authentication),
    held_reason: row.held_reason,
    received_at: formatTimestamp(row.received_at) as string,
  };
}

/** A reply's authentication as the API shows it: its fields in the schema's order (jsonb keeps its own). */
function toApiAuthentication({ spf, dkim, dmarc, from_domain, results }: ReplyAuthentication): ReplyAuthentication {
  return { spf, dkim, dmarc, from_domain, results };
}

/** The replies to a message by the hour or day (`bucketSeconds`) they came, automatic ones left out: the report's timeline. */
export async function replyTimeline(db: Db, kind: string, messageId: number, bucketSeconds: number) {
  const { rows } = await sql<{ at: Date; n: string }>`
    SELECT to_timestamp(floor(extract(epoch FROM received_at) / ${bucketSeconds}) * ${bucketSeconds}) AS at, count(*) AS n
    FROM replies WHERE message_kind = ${kind} AND message_id = ${messageId} AND NOT auto_reply
    GROUP BY 1 ORDER BY 1`.execute(db);
  return rows.map((row) => ({ at: new Date(row.at), n: Number(row.n) }));
}

/** A user's newest replies (automatic ones left out), with how many of their replies are held and still undecided, for the dashboard. */
export async function latestReplies(db: Db, userId: number, limit: number) {
  const [rows, held] = await Promise.all([
    db
      .selectFrom('replies')
      .select(['id', 'message_kind', 'message_id', 'from_address', 'from_name', 'subject', 'received_at', 'held_reason'])
      .where('user_id', '=', userId)
      .where('auto_reply', '=', false)
      .orderBy('received_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute(),
    db
      .selectFrom('replies')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('user_id', '=', userId)
      .where('held_reason', 'is not', null)
      .where('released_at', 'is', null)
      .where('discarded_at', 'is', null)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, held: Number(held.n) };
}

/** One message taken by the receiver for one of our addresses, and the reply it brings, if any. */
export interface InboundMessage {
  recipient: string;
  messageId: string;
  deliveryId: number;
  kind: InboundMessageKind;
  reply: Omit<NewReply, 'inbound_id' | 'received_at'> | undefined;
}

const keyOf = (recipient: string, messageId: string) => `${recipient}\u0000${messageId}`;

/**
 * Stores messages once per recipient address and Message-ID, with their replies, in one
 * transaction. Returns the replies to forward to the sender: a person's reply stored now, or stored
 * before and not forwarded yet (the relay refused it then), by message.
 */
export async function storeInboundMessages(
  db: Db,
  messages: readonly InboundMessage[],
  now: Date,
  forwardsPerDay: number,
): Promise<Map<InboundMessage, number>> {
  if (messages.length === 0) return new Map();
  return db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('inbound_messages')
      .values(
        messages.map((m) => ({
          recipient: m.recipient,
          message_id: m.messageId,
          delivery_id: m.deliveryId,
          kind: m.kind,
          received_at: now,
        })),
      )
      .onConflict((oc) => oc.columns(['recipient', 'message_id']).doNothing())
      .returning(['id', 'recipient', 'message_id'])
      .execute();
    const fresh = new Map(inserted.map((r) => [keyOf(r.recipient, r.message_id), r.id]));
    const newReplies = messages.flatMap((m) => {
      const inboundId = fresh.get(keyOf(m.recipient, m.messageId));
      return inboundId !== undefined && m.reply ? [{ ...m.reply, inbound_id: inboundId, received_at: now }] : [];
    });
    // At most `forwardsPerDay` replies per reply address (delivery) reach the agent in any 24
    // hours; the rest are kept, held. (Two batches recorded at once may each let one more by.)
    const forwardable = newReplies.filter((r) => !r.auto_reply && !r.held_reason);
    if (forwardable.length > 0) {
      const counts = await trx
        .selectFrom('replies')
        .select(['delivery_id', (eb) => eb.fn.countAll<string>().as('n')])
        .where('delivery_id', 'in', [...new Set(forwardable.map((r) => r.delivery_id))])
        .where('received_at', '>', new Date(now.getTime() - 86_400_000))
        .where('auto_reply', '=', false)
        .where('held_reason', 'is', null)
        .groupBy('delivery_id')
        .execute();
      const forwarded = new Map(counts.map((c) => [c.delivery_id, Number(c.n)]));
      for (const reply of forwardable) {
        const n = forwarded.get(reply.delivery_id) ?? 0;
        if (n >= forwardsPerDay) reply.held_reason = 'forward_limit';
        else forwarded.set(reply.delivery_id, n + 1);
      }
    }
    const stored =
      newReplies.length > 0 ? await trx.insertInto('replies').values(newReplies).returning(['id', 'inbound_id']).execute() : [];
    const replyOf = new Map(stored.map((r) => [r.inbound_id, r.id]));
    const heldNow = new Set(newReplies.filter((r) => r.held_reason).map((r) => r.inbound_id));
    const toForward = messages.filter((m) => {
      if (!m.reply || m.reply.auto_reply || m.reply.held_reason) return false;
      const inboundId = fresh.get(keyOf(m.recipient, m.messageId));
      return inboundId === undefined || !heldNow.has(inboundId);
    });
    const again = toForward.filter((m) => !fresh.has(keyOf(m.recipient, m.messageId)));
    const unsent =
      again.length > 0
        ? await trx
            .selectFrom('replies as r')
            .innerJoin('inbound_messages as m', 'm.id', 'r.inbound_id')
            .select(['r.id', 'm.recipient', 'm.message_id'])
            .where('r.forwarded_at', 'is', null)
            .where('r.auto_reply', '=', false)
            .where('r.held_reason', 'is', null)
            .where((eb) => eb.or(again.map((m) => eb.and([eb('m.recipient', '=', m.recipient), eb('m.message_id', '=', m.messageId)]))))
            .execute()
        : [];
    const unsentIds = new Map(unsent.map((u) => [keyOf(u.recipient, u.message_id), u.id]));
    const forward = new Map<InboundMessage, number>();
    for (const m of toForward) {
      const key = keyOf(m.recipient, m.messageId);
      const inboundId = fresh.get(key);
      const replyId = inboundId !== undefined ? replyOf.get(inboundId) : unsentIds.get(key);
      if (replyId !== undefined) forward.set(m, replyId);
    }
    return forward;
  });
}

/** Notes the replies that went out to their senders. */
export async function markRepliesForwarded(db: Db, replyIds: readonly number[], now: Date): Promise<void> {
  if (replyIds.length > 0) await db.updateTable('replies').set({ forwarded_at: now }).where('id', 'in', replyIds).execute();
}

/**
 * A user's replies, newest first, by id before `beforeId` (keys, never an offset): the replies
 * page. `contactId` narrows them to one contact's (the contact's history).
 */
export async function repliesBefore(db: Db, userId: number, o: { beforeId?: number; limit: number; contactId?: number }) {
  let query = db
    .selectFrom('replies')
    .select([...LISTED, 'message_kind', 'message_id', 'forwarded_at', 'released_at', 'discarded_at'])
    .where('user_id', '=', userId)
    .orderBy('id', 'desc')
    .limit(o.limit);
  if (o.beforeId) query = query.where('id', '<', o.beforeId);
  if (o.contactId) query = query.where('contact_id', '=', o.contactId);
  return query.execute();
}

/** One reply with its owner (for the access rule): the page of a held reply's Release or Discard. */
export function findReply(db: Db, id: number) {
  return findOwnedRow(
    db,
    db
      .selectFrom('replies')
      .select([...LISTED, 'user_id', 'message_kind', 'message_id', 'forwarded_at', 'released_at', 'discarded_at'])
      .where('id', '=', id),
  );
}

/**
 * Claims a held reply for its release, once: only a held one, neither discarded nor forwarded, and
 * not claimed already — but for a claim older than `staleBefore`, whose forward never finished
 * (the process died on the way). Two Releases at once: one claims it, the other finds nothing.
 */
export async function claimHeldReply(db: Db, userId: number, id: number, now: Date, staleBefore: Date) {
  return db
    .updateTable('replies')
    .set({ released_at: now })
    .where('id', '=', id)
    .where('user_id', '=', userId)
    .where('held_reason', 'is not', null)
    .where('discarded_at', 'is', null)
    .where('forwarded_at', 'is', null)
    .where((eb) => eb.or([eb('released_at', 'is', null), eb('released_at', '<', staleBefore)]))
    .returning(['id', 'delivery_id', 'from_address', 'from_name', 'subject', 'text', 'authentication', 'held_reason'])
    .executeTakeFirst();
}

/** Gives a claimed release back when its forward failed, so that Release can be tried again. */
export async function unclaimHeldReply(db: Db, id: number, claimedAt: Date): Promise<void> {
  await db
    .updateTable('replies')
    .set({ released_at: null })
    .where('id', '=', id)
    .where('released_at', '=', claimedAt)
    .where('forwarded_at', 'is', null)
    .execute();
}

/** Discards a held reply that is neither released nor forwarded: kept, never to be forwarded. True when it was discarded now. */
export async function discardHeldReply(db: Db, userId: number, id: number, now: Date): Promise<boolean> {
  const result = await db
    .updateTable('replies')
    .set({ discarded_at: now })
    .where('id', '=', id)
    .where('user_id', '=', userId)
    .where('held_reason', 'is not', null)
    .where('discarded_at', 'is', null)
    .where('released_at', 'is', null)
    .where('forwarded_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
