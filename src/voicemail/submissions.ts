import { randomBytes, randomUUID } from 'node:crypto';
import { type Selectable, type SqlBool, sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { OutcomeReason, ProviderSubmissionsTable } from '../db/schema.ts';
import { MAYBE_WITH_PROVIDER_STATES, stateList } from '../sending/delivery-states.ts';
import type { VoicemailProvider } from './providers.ts';

/**
 * What Hopper keeps about each hand-over to a voicemail provider (table `provider_submissions`),
 * the provider's id of each uploaded media item (`provider_media`), the provider events already
 * handled (`provider_events`) and the receipts waiting for their results (`provider_receipts`).
 * Every statement on those tables is here.
 */
/** A row of `provider_submissions`, less its creation time. */
type Submission = Omit<Selectable<ProviderSubmissionsTable>, 'created_at'>;

/**
 * The submission of a delivery, made on its first try: a random UUID v4 `Idempotency-Key` and a
 * callback token, kept so that every later try sends the same key (and the same callback URL).
 */
export async function ensureSubmission(
  db: Db,
  delivery: { deliveryId: number; provider: VoicemailProvider; phone: string },
  now: Date,
): Promise<Submission> {
  await db
    .insertInto('provider_submissions')
    .values({
      delivery_id: delivery.deliveryId,
      provider: delivery.provider,
      phone: delivery.phone,
      idempotency_key: randomUUID(),
      callback_token: randomBytes(24).toString('base64url'),
      created_at: now,
    })
    .onConflict((oc) => oc.column('delivery_id').doNothing())
    .execute();
  const row = await findSubmission(db, delivery.deliveryId);
  if (!row) throw new Error(`submission of delivery ${delivery.deliveryId} vanished`);
  return row;
}

export async function findSubmission(db: Db, deliveryId: number): Promise<Submission | undefined> {
  const row = await db.selectFrom('provider_submissions').selectAll().where('delivery_id', '=', deliveryId).executeTakeFirst();
  return row && { ...row, delivery_id: Number(row.delivery_id) };
}

/**
 * Keeps the body of a delivery's first request under its key, unless one is kept already; answers
 * the body kept, which every try sends.
 */
export async function freezeRequestBody(db: Db, deliveryId: number, body: string): Promise<string> {
  const row = await db
    .updateTable('provider_submissions')
    .set({ request_body: sql<string>`coalesce(request_body, ${body})` })
    .where('delivery_id', '=', deliveryId)
    .returning('request_body')
    .executeTakeFirst();
  return row?.request_body ?? body;
}

/** Notes the provider's id of the drop and, when the provider may stay silent, when to ask it. */
export async function noteAccepted(db: Db, deliveryId: number, remoteId: string | undefined, nextCheckAt?: Date): Promise<void> {
  await db
    .updateTable('provider_submissions')
    .set({ remote_id: remoteId ?? null, ...(nextCheckAt ? { next_check_at: nextCheckAt } : {}) })
    .where('delivery_id', '=', deliveryId)
    .execute();
}

/**
 * After a status check: asks again at `next`, or (undefined) gives up. Asking again only holds while
 * the checks are still on (`next_check_at` set): a stop recorded while the check was under way
 * (the cancel job) wins. Answers whether the next check is planned.
 */
export async function noteChecked(db: Db, deliveryId: number, next: Date | undefined): Promise<boolean> {
  const updated = await db
    .updateTable('provider_submissions')
    .set((eb) => ({ checks: eb('checks', '+', 1), next_check_at: next ?? null }))
    .where('delivery_id', '=', deliveryId)
    .$if(next !== undefined, (q) => q.where('next_check_at', 'is not', null))
    .executeTakeFirst();
  return next !== undefined && updated.numUpdatedRows > 0n;
}

/** Advisory-lock class of a provider's number (two-key form; contacts/import.ts uses 14 001). */
const NUMBER_LOCK = 15_001;

/**
 * Serialises, until the transaction ends, everything that matches a provider's events to the
 * deliveries of one number (statuses, receipts, callbacks): two events for one number, arriving
 * together, are matched one after the other, each seeing what the other did. Events for other
 * numbers do not wait.
 */
export async function lockNumber(trx: Db, provider: VoicemailProvider, phone: string): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(${NUMBER_LOCK}, hashtext(${`${provider} ${phone}`}))`.execute(trx);
}

/**
 * The delivery a result event names only by its number (and the provider's drop id): the
 * submission that drop id was already seen on (Drop Cowboy's callback echoes both it and our
 * `foreign_id`), else the submission of that number that was handed over first and still waits
 * for a result — send order: those the provider accepted, in the order the hand-overs were
 * recorded, then those tried without an answer (a lost reply: the provider may hold them), by
 * first try. A submission already bound to another drop id is not a candidate. Call under
 * `lockNumber`.
 */
export async function matchResult(
  trx: Db,
  provider: VoicemailProvider,
  phone: string,
  remoteDropId: string | undefined,
): Promise<Submission | undefined> {
  if (remoteDropId) {
    const known = await trx
      .selectFrom('provider_submissions')
      .selectAll()
      .where('provider', '=', provider)
      .where('remote_drop_id', '=', remoteDropId)
      .orderBy('delivery_id')
      .limit(1)
      .forUpdate()
      .executeTakeFirst();
    if (known) return { ...known, delivery_id: Number(known.delivery_id) };
  }
  const row = await trx
    .selectFrom('provider_submissions as s')
    .innerJoin('deliveries as d', 'd.id', 's.delivery_id')
    .selectAll('s')
    .where('s.provider', '=', provider)
    .where('s.phone', '=', phone)
    .where('s.result_at', 'is', null)
    .where('s.remote_drop_id', 'is', null)
    // Only drops the provider may hold: accepted, or tried with no answer yet (a lost reply).
    .where((eb) => eb.or([eb('s.remote_id', 'is not', null), sql<SqlBool>`d.state IN (${stateList(MAYBE_WITH_PROVIDER_STATES)})`]))
    .orderBy(sql`d.sent_at IS NULL`)
    .orderBy('d.sent_at')
    .orderBy(sql`s.remote_id IS NULL`)
    .orderBy('s.created_at')
    .orderBy('s.delivery_id')
    .limit(1)
    .forUpdate('s')
    .executeTakeFirst();
  return row && { ...row, delivery_id: Number(row.delivery_id) };
}

/**
 * How far apart a receipt and the result it belongs to may arrive. Drop Cowboy posts the receipt
 * right after the status (the recording is ready about a minute after the attempt) and retries a
 * webhook at most twice, about 1 and then 5 minutes later; an hour is ample, and keeps a receipt
 * from pairing with a result of the same number from another day whose own receipt was lost.
 */
const RECEIPT_WINDOW_MS = 60 * 60 * 1000;

interface Receipt {
  eventKey: string;
  phone: string;
  remoteDropId: string | undefined;
  reasonCode: number | undefined;
  proofUrl: string | undefined;
  occurredAt: Date | undefined;
}

/**
 * Whether a receipt for `phone` can be for one of Hopper's sends: a submission of that number
 * still waiting for its result, or with a recent result that has no receipt yet.
 */
export async function receiptMayBeOurs(trx: Db, provider: VoicemailProvider, phone: string, now: Date): Promise<boolean> {
  const since = new Date(now.getTime() - RECEIPT_WINDOW_MS);
  const { rows } = await sql<{ delivery_id: string }>`
    SELECT s.delivery_id FROM provider_submissions s JOIN deliveries d ON d.id = s.delivery_id
    WHERE s.provider = ${provider} AND s.phone = ${phone}
      AND (
        (s.result_at IS NULL AND (s.remote_id IS NOT NULL OR d.state IN (${stateList(MAYBE_WITH_PROVIDER_STATES)})))
        OR (s.result_at >= ${since}
            AND NOT EXISTS (SELECT 1 FROM provider_receipts r WHERE r.provider = s.provider AND r.delivery_id = s.delivery_id))
      )
    LIMIT 1`.execute(trx);
  return rows.length > 0;
}

/** Keeps a receipt, not yet paired with a delivery. Call under `lockNumber`. */
export async function keepReceipt(trx: Db, provider: VoicemailProvider, receipt: Receipt, now: Date): Promise<void> {
  await sql`
    INSERT INTO provider_receipts
      (provider, event_key, phone, remote_drop_id, reason_code, proof_of_delivery_url, occurred_at, received_at)
    VALUES (${provider}, ${receipt.eventKey}, ${receipt.phone}, ${receipt.remoteDropId ?? null}, ${receipt.reasonCode ?? null},
      ${receipt.proofUrl ?? null}, ${receipt.occurredAt ?? null}, ${now})
    ON CONFLICT (provider, event_key) DO NOTHING`.execute(trx);
}

/**
 * Pairs the receipts of a number still waiting with the results they belong to, one receipt per
 * result: a receipt takes a recorded result of its number that has no receipt yet, with the same
 * reason code, recorded within RECEIPT_WINDOW_MS of it — the one whose drop id it names if any,
 * else the earliest by the provider's time (a receipt follows its status, so the n-th receipt
 * belongs with the n-th status: wherever that status went). It adds its proof of delivery (a
 * proof from the per-send callback, matched by `foreign_id`, stays) and never records a result.
 * Receipts too old to pair are dropped. Call under `lockNumber`. Returns the receipts paired.
 */
export async function pairReceipts(
  trx: Db,
  provider: VoicemailProvider,
  phone: string,
  now: Date,
): Promise<{ eventKey: string; deliveryId: number }[]> {
  const since = new Date(now.getTime() - RECEIPT_WINDOW_MS);
  await sql`
    DELETE FROM provider_receipts
    WHERE provider = ${provider} AND phone = ${phone} AND delivery_id IS NULL AND received_at < ${since}`.execute(trx);
  const { rows: waiting } = await sql<{
    event_key: string;
    remote_drop_id: string | null;
    reason_code: number | null;
    proof_of_delivery_url: string | null;
    received_at: Date;
  }>`
    SELECT event_key, remote_drop_id, reason_code, proof_of_delivery_url, received_at FROM provider_receipts
    WHERE provider = ${provider} AND phone = ${phone} AND delivery_id IS NULL
    ORDER BY coalesce(occurred_at, received_at), received_at, event_key`.execute(trx);
  const paired: { eventKey: string; deliveryId: number }[] = [];
  for (const receipt of waiting) {
    const receivedAt = new Date(receipt.received_at).getTime();
    const { rows } = await sql<{ delivery_id: string }>`
      SELECT s.delivery_id FROM provider_submissions s
      WHERE s.provider = ${provider} AND s.phone = ${phone} AND s.result_at IS NOT NULL
        AND s.result_at BETWEEN ${new Date(receivedAt - RECEIPT_WINDOW_MS)} AND ${new Date(receivedAt + RECEIPT_WINDOW_MS)}
        AND (${receipt.reason_code}::integer IS NULL OR s.reason_code IS NULL OR s.reason_code = ${receipt.reason_code}::integer)
        AND NOT EXISTS (SELECT 1 FROM provider_receipts r WHERE r.provider = s.provider AND r.delivery_id = s.delivery_id)
      ORDER BY coalesce(s.remote_drop_id = ${receipt.remote_drop_id}::text, false) DESC,
        coalesce(s.result_occurred_at, s.result_at), s.delivery_id
      LIMIT 1`.execute(trx);
    const target = rows[0];
    if (!target) continue;
    const deliveryId = Number(target.delivery_id);
    await sql`
      UPDATE provider_receipts SET delivery_id = ${deliveryId}
      WHERE provider = ${provider} AND event_key = ${receipt.event_key}`.execute(trx);
    await trx
      .updateTable('provider_submissions')
      .set({ proof_of_delivery_url: sql<string | null>`coalesce(proof_of_delivery_url, ${receipt.proof_of_delivery_url})` })
      .where('delivery_id', '=', deliveryId)
      .execute();
    await noteEventDelivery(trx, provider, receipt.event_key, deliveryId);
    paired.push({ eventKey: receipt.event_key, deliveryId });
  }
  return paired;
}

/**
 * Stores a provider's result on the submission unless one is already there (the first channel
 * wins); the provider's drop id is kept whichever brings it first, and a proof of delivery given
 * with a result matched by `foreign_id` (the callback) is kept over a receipt's. True when this
 * call stored the result.
 */
export async function storeResult(
  trx: Db,
  deliveryId: number,
  result:
    | { delivered: boolean; reasonCode: number | null; detail: string | null; outcome: OutcomeReason; occurredAt: Date; at: Date }
    | undefined,
  extra: { proofUrl?: string; remoteDropId?: string },
): Promise<boolean> {
  if (extra.proofUrl || extra.remoteDropId) {
    await trx
      .updateTable('provider_submissions')
      .set({
        ...(extra.proofUrl ? { proof_of_delivery_url: extra.proofUrl } : {}),
        ...(extra.remoteDropId ? { remote_drop_id: sql<string>`coalesce(remote_drop_id, ${extra.remoteDropId})` } : {}),
      })
      .where('delivery_id', '=', deliveryId)
      .execute();
  }
  if (!result) return false;
  const stored = await trx
    .updateTable('provider_submissions')
    .set({
      result_at: result.at,
      delivered: result.delivered,
      reason_code: result.reasonCode,
      result_detail: result.detail,
      result_outcome: JSON.stringify(result.outcome),
      result_occurred_at: result.occurredAt,
      next_check_at: null,
    })
    .where('delivery_id', '=', deliveryId)
    .where('result_at', 'is', null)
    .executeTakeFirst();
  return Number(stored.numUpdatedRows) > 0;
}

/**
 * Claims a provider event by its key: true the first time, false when it was handled before (a
 * replay). The delivery it was matched to is kept with it.
 */
export async function claimEvent(
  trx: Db,
  provider: VoicemailProvider,
  key: string,
  deliveryId: number | null,
  now: Date,
): Promise<boolean> {
  const inserted = await trx
    .insertInto('provider_events')
    .values({ provider, event_key: key, delivery_id: deliveryId, received_at: now })
    .onConflict((oc) => oc.columns(['provider', 'event_key']).doNothing())
    .returning('event_key')
    .executeTakeFirst();
  return inserted !== undefined;
}

/** The provider's id of a media item uploaded to it before. */
export async function remoteMediaId(db: Db, provider: VoicemailProvider, mediaId: number): Promise<string | undefined> {
  const row = await db
    .selectFrom('provider_media')
    .select('remote_id')
    .where('provider', '=', provider)
    .where('media_id', '=', mediaId)
    .executeTakeFirst();
  return row?.remote_id;
}

export async function saveRemoteMediaId(db: Db, provider: VoicemailProvider, mediaId: number, remoteId: string, now: Date): Promise<void> {
  await db
    .insertInto('provider_media')
    .values({ provider, media_id: mediaId, remote_id: remoteId, created_at: now })
    .onConflict((oc) => oc.columns(['provider', 'media_id']).doNothing())
    .execute();
}

/** Forgets a provider event claimed for nothing of Hopper's (another installation on the account, a drop Hopper never made). */
export async function forgetEvent(trx: Db, provider: VoicemailProvider, key: string): Promise<void> {
  await trx.deleteFrom('provider_events').where('provider', '=', provider).where('event_key', '=', key).execute();
}

/** Keeps with a claimed provider event the delivery it was matched to. */
export async function noteEventDelivery(trx: Db, provider: VoicemailProvider, key: string, deliveryId: number): Promise<void> {
  await trx
    .updateTable('provider_events')
    .set({ delivery_id: deliveryId })
    .where('provider', '=', provider)
    .where('event_key', '=', key)
    .execute();
}
