import type { OutcomeReason } from '../db/schema.ts';
import type { MessageKind, MessageRows } from '../messages/kinds.ts';
import type { ClaimedDelivery } from './deliveries.ts';

/** An outcome's reason with who gave it (`smtp`, a voicemail provider's name). */
type SourcedReason = OutcomeReason & { source: string };

/** Resolves when one more delivery may be accepted by the provider without being recorded yet. */
export type HandOver = () => Promise<void>;

/**
 * What a channel (email, a voicemail provider) answers for one delivery. The engine turns it into
 * the delivery's next state and counters; the channel never touches the ledger itself.
 */
export type DeliveryOutcome =
  /** Handed over: the provider accepted it (counted as `sent`). */
  | { kind: 'sent'; providerMessageId?: string }
  /**
   * A temporary failure: tried again later with backoff, not before `notBefore` (a provider's
   * Retry-After), counted as `deferred`; `outcome` is kept if it was the last try.
   */
  | { kind: 'deferred'; error: string; outcome?: SourcedReason; notBefore?: Date }
  /**
   * A permanent failure of this delivery only, counted as `failed`; `bounce` when the relay
   * refused the address or the message, `outcome` why (kept on the delivery, docs/outcomes.md:
   * `permanent` when the address itself is bad). The channel says what happened; what it makes of
   * the contact (a hard bounce retires the address) is the outcome recorder's to decide
   * (delivery-events.ts).
   */
  | { kind: 'failed'; error: string; bounce?: boolean; outcome?: SourcedReason }
  /**
   * The provider asked the sender as a whole to slow down (an SMTP relay's 421 or 4.7.x), or this
   * delivery was held back unsent while it waits: tried again in `retryInMs`, the attempt taken
   * back — the wait is no fault of this delivery, so it never uses up its tries; counted as
   * `deferred` only when the provider refused this delivery itself (`refused`).
   */
  | { kind: 'throttled'; retryInMs: number; error: string; refused: boolean }
  /** Not allowed yet (calling hours): tried again at `until`, not counted. */
  | { kind: 'held'; until: Date; reason: string }
  /** Not to be sent at all any more (the contact opted out meanwhile): not counted. */
  | { kind: 'cancelled'; reason: string };

export interface Channel<K extends MessageKind = MessageKind, Prepared = unknown> {
  /** Loads once per batch what every delivery of the message shares (template parts, audio URL, …). */
  prepare(message: MessageRows[K]): Promise<Prepared>;
  /**
   * Hands one delivery to the provider. Throwing counts as a temporary failure. A channel that can
   * stage a delivery calls `handOver` at the last moment before the act it cannot take back (an SMTP
   * message's final dot) and goes on once it resolves; the engine bounds how many deliveries of the
   * process are accepted and not yet recorded there (send-batch.ts). One that does not call it is
   * bounded once it answers `sent`.
   */
  deliver(prepared: Prepared, delivery: ClaimedDelivery, handOver?: HandOver): Promise<DeliveryOutcome>;
  close?(): Promise<void>;
}

/** The channel of each kind; what a channel prepares is its own business (the engine only hands it back). */
export type Channels = { [K in MessageKind]?: Channel<K, unknown> };
