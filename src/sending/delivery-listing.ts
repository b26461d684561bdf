import { Type } from 'typebox';
import type { DeliveryRow } from '../db/schema.ts';
import type { Filters } from '../db/search.ts';
import { Id, Nullable, StringEnum, Timestamp } from '../json-schema.ts';
import { ExternalIdOut, MetadataOut } from '../messages/message-fields.ts';
import { formatTimestamp } from '../time.ts';
import { DELIVERY_STATES } from './delivery-states.ts';
import { Outcome, toApiOutcome } from './outcomes.ts';

/**
 * `GET /{voicemail_drops|templated_emails}/{id}/deliveries`: the delivery ledger of one message,
 * one item per recipient, so a sender can see who got it, who bounced and who is still pending.
 * Its statement is `searchDeliveries` (deliveries.ts).
 */

export const Delivery = Type.Object({
  id: Id,
  contact_id: Id,
  address: Type.String({ description: 'The email address or phone number used, as it was when the message started sending' }),
  state: StringEnum(DELIVERY_STATES),
  attempts: Type.Integer({ description: 'Hand-overs to the provider so far' }),
  last_error: Nullable(Type.String({ description: 'Why the last attempt failed, or why the delivery was skipped' })),
  outcome: Nullable(Outcome),
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
  message_external_id: { ...ExternalIdOut, description: 'The message\'s external_id, as it is now (docs/webhooks.md, "Correlation")' },
  message_metadata: { ...MetadataOut, description: 'The message\'s metadata, as it is now (docs/webhooks.md, "Correlation")' },
  created_at: Timestamp,
  updated_at: Timestamp,
});

/** What a delivery echoes of its message (docs/webhooks.md, "Correlation"). */
export interface MessageCorrelation {
  external_id: string | null;
  metadata: Record<string, string>;
}

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
  | 'outcome'
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

export function toApiDelivery(row: ListedDelivery, message: MessageCorrelation | undefined) {
  return {
    id: row.id,
    contact_id: row.contact_id,
    address: row.address,
    state: row.state,
    attempts: row.attempts,
    last_error: row.last_error,
    outcome: toApiOutcome(row.outcome),
    provider_message_id: row.provider_message_id,
    sent_at: formatTimestamp(row.sent_at),
    delivered_at: formatTimestamp(row.delivered_at),
    ...waiting(row),
    proof_of_delivery_url: row.proof_of_delivery_url ?? null,
    message_external_id: message?.external_id ?? null,
    message_metadata: message?.metadata ?? {},
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
