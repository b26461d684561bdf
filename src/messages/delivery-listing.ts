import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import type { DeliveryRow, DeliveryState } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { Id, Nullable, StringEnum, Timestamp } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';
import type { MessageKind } from './kinds.ts';

/**
 * `GET /{voicemail_drops|templated_emails}/{id}/deliveries`: the delivery ledger of one message,
 * one item per recipient, so a sender can see who got it, who bounced and who is still pending.
 */

export const DELIVERY_STATES = [
  'queued',
  'sending',
  'deferred',
  'held',
  'sent',
  'delivered',
  'bounced',
  'dropped',
  'failed',
  'cancelled',
  'skipped',
] as const satisfies readonly DeliveryState[];

/** Every state is listed (a compile-time check): the listing reads the deliveries state by state (runSearch's partitions). */
export const EVERY_DELIVERY_STATE_LISTED: [Exclude<DeliveryState, (typeof DELIVERY_STATES)[number]>] extends [never] ? true : never = true;

export const Delivery = Type.Object({
  id: Id,
  contact_id: Id,
  address: Type.String({ description: 'The email address or phone number used, as it was when the message started sending' }),
  state: StringEnum(DELIVERY_STATES),
  attempts: Type.Integer({ description: 'Hand-overs to the provider so far' }),
  last_error: Nullable(Type.String({ description: 'Why the last attempt failed, or why the delivery was skipped' })),
  provider_message_id: Nullable(Type.String()),
  sent_at: Nullable(Timestamp),
  delivered_at: Nullable(Timestamp),
  waiting_reason: Nullable(
    Type.String({
      description:
        "Why a delivery that is not finished waits: held by calling hours, retrying after a failure, or handed over and waiting for the provider's result",
    }),
  ),
  next_attempt_at: Nullable({
    ...Timestamp,
    description:
      'When Hopper next tries it (queued, deferred, held) or next asks the provider about it (sent); null when nothing is planned',
  }),
  proof_of_delivery_url: Nullable(
    Type.String({ description: "The provider's proof of delivery (a recording of the call; Drop Cowboy keeps it 7 days)" }),
  ),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const DELIVERY_FILTERS: Filters = {
  state: { kind: 'enum', column: 'd.state', values: DELIVERY_STATES },
  contact_id: { kind: 'id', column: 'd.contact_id' },
};

type ListedDelivery = Pick<
  DeliveryRow,
  | 'id'
  | 'contact_id'
  | 'address'
  | 'state'
  | 'attempts'
  | 'last_error'
  | 'provider_message_id'
  | 'sent_at'
  | 'delivered_at'
  | 'created_at'
  | 'updated_at'
  | 'next_attempt_at'
  | 'message_kind'
> &
  ProviderResult;

/** What the provider said of a voicemail hand-over (provider_submissions); absent where the row comes from elsewhere (a webhook's delivery snapshot). */
type ProviderResult = {
  provider?: string | null;
  result_at?: Date | null;
  next_check_at?: Date | null;
  proof_of_delivery_url?: string | null;
};

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

export function toApiDelivery(row: ListedDelivery) {
  return {
    id: row.id,
    contact_id: row.contact_id,
    address: row.address,
    state: row.state,
    attempts: row.attempts,
    last_error: row.last_error,
    provider_message_id: row.provider_message_id,
    sent_at: formatTimestamp(row.sent_at),
    delivered_at: formatTimestamp(row.delivered_at),
    ...waiting(row),
    proof_of_delivery_url: row.proof_of_delivery_url ?? null,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
  };
}

/** Why an unfinished delivery waits, and until when. */
function waiting(row: ListedDelivery): { waiting_reason: string | null; next_attempt_at: string | null } {
  const at = formatTimestamp(row.next_attempt_at);
  switch (row.state) {
    case 'queued':
      return { waiting_reason: 'Queued: waiting for its turn in the send', next_attempt_at: at };
    case 'held':
      return { waiting_reason: row.last_error ?? 'Held until calling hours open', next_attempt_at: at };
    case 'deferred':
      return { waiting_reason: `Retrying after a temporary failure${row.last_error ? `: ${row.last_error}` : ''}`, next_attempt_at: at };
    case 'sending':
      return { waiting_reason: 'Being handed over to the provider', next_attempt_at: null };
    case 'sent':
      // A voicemail provider reports each drop's result later; an email's `sent` is its hand-over.
      if (row.message_kind === 'voicemail_drop' && !row.result_at) {
        const who = row.provider ? `${row.provider}'s` : "the provider's";
        return { waiting_reason: `Handed over: waiting for ${who} result`, next_attempt_at: formatTimestamp(row.next_check_at ?? null) };
      }
      return { waiting_reason: null, next_attempt_at: null };
    default:
      return { waiting_reason: null, next_attempt_at: null };
  }
}
