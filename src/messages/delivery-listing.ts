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
] as const satisfies readonly DeliveryState[];

export const Delivery = Type.Object({
  id: Id,
  contact_id: Id,
  address: Type.String({ description: 'The email address or phone number used, as it was when the message started sending' }),
  state: StringEnum(DELIVERY_STATES),
  attempts: Type.Integer({ description: 'Hand-overs to the provider so far' }),
  last_error: Nullable(Type.String()),
  provider_message_id: Nullable(Type.String()),
  sent_at: Nullable(Timestamp),
  delivered_at: Nullable(Timestamp),
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
>;

/** One page of the deliveries of one message, filtered by `DELIVERY_FILTERS`. */
export function searchDeliveries(db: Db, kind: MessageKind, message: { id: number; user_id: number }, params: SearchParams) {
  const query = db
    .selectFrom('deliveries as d')
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
    ])
    .where('d.user_id', '=', message.user_id)
    .where('d.message_kind', '=', kind)
    .where('d.message_id', '=', message.id);
  return runSearch(query, DELIVERY_FILTERS, params, 'd.id');
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
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
  };
}
