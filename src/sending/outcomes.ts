import { Type } from 'typebox';
import type { OutcomeReason, RecordedOutcome } from '../db/schema.ts';
import { Nullable, Timestamp } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';

/**
 * A delivery's outcome: why it ended as it did, in Hopper's classification and the provider's own
 * code and words, with who said it and when (docs/outcomes.md). Channels and event readers give
 * an `OutcomeReason`; the delivery keeps it as a `RecordedOutcome`.
 */
export const Outcome = Type.Object(
  {
    classification: Type.String({
      description: "Hopper's class of the result, one per channel (docs/outcomes.md): delivered, hard_bounce, mailbox_full, landline, …",
    }),
    permanent: Type.Boolean({ description: 'Sending to this address or number again is pointless' }),
    code: Nullable(Type.String({ description: "The provider's code: a DSN status (5.1.1), an SMTP reply code, a provider's reason code" })),
    description: Nullable(Type.String({ description: "The provider's own words" })),
    source: Type.String({ description: 'Who said it: smtp, dsn, sendgrid, ses, postmark, dropcowboy, slybroadcast, sandbox, hopper' }),
    at: Timestamp,
  },
  { description: 'Why the delivery ended as it did' },
);

const MAX_DESCRIPTION = 500;

export function recordedOutcome(reason: OutcomeReason, source: string, at: Date): RecordedOutcome {
  const description = reason.description?.replace(/\s+/g, ' ').trim() || null;
  return {
    classification: reason.classification,
    permanent: reason.permanent,
    code: reason.code ?? null,
    description: description && description.length > MAX_DESCRIPTION ? `${description.slice(0, MAX_DESCRIPTION - 1)}…` : description,
    source,
    at: formatTimestamp(at),
  };
}

/** A recorded outcome as the API shows it: its fields in the schema's order (jsonb keeps its own). */
export function toApiOutcome(outcome: RecordedOutcome | null | undefined): RecordedOutcome | null {
  if (!outcome) return null;
  const { classification, permanent, code, description, source, at } = outcome;
  return { classification, permanent, code, description, source, at };
}
