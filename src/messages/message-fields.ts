import { Type } from 'typebox';
import type { FieldErrors } from '../errors.ts';
import { Nullable, StringEnum } from '../json-schema.ts';
import { MESSAGE_STATUSES, SEND_TYPES } from './lifecycle.ts';
import { COUNTERS } from './reporting.ts';

/**
 * Schema pieces and small rules shared by the two message resources (voicemail drops and
 * templated emails), so both speak the same status, schedule and reporting language.
 */
export const Reporting = Type.Object({
  date: Type.Null(),
  ...Object.fromEntries(COUNTERS.map((name) => [name, Type.Integer({ minimum: 0 })])),
});

export const StatusField = Type.String({
  maxLength: 32,
  description: `Saved or Scheduled; Cancelled stops a message that is Sending. Read: one of ${MESSAGE_STATUSES.join(', ')}`,
});
export const StatusOut = StringEnum(MESSAGE_STATUSES);
export const SendType = StringEnum(SEND_TYPES);
export const SendAtField = Nullable(
  Type.String({ format: 'date-time', description: 'ISO 8601 with an offset or Z, e.g. 2026-07-12T12:56:00-04:00' }),
);

/**
 * `send_at` as sent: undefined when absent, null to clear, a Date otherwise (already format-checked),
 * in whole seconds as the API shows times, so a client that PUTs back what it read changes nothing.
 */
export function parseSendAt(value: string | null | undefined): Date | null | undefined {
  return value === undefined || value === null ? value : new Date(Math.floor(Date.parse(value) / 1000) * 1000);
}

/** Whether any of `keys` is present in the body with a value other than the stored one. */
export function changesAny(current: Record<string, unknown>, body: Record<string, unknown>, keys: readonly string[]): boolean {
  return keys.some((key) => body[key] !== undefined && JSON.stringify(body[key]) !== JSON.stringify(current[key]));
}

// ── Correlation (docs/webhooks.md, "Correlation") ────────────────────────────────────────────

const MAX_METADATA_KEYS = 20;
const MAX_METADATA_KEY = 40;
const MAX_METADATA_VALUE = 500;
const MAX_METADATA_BYTES = 4096;

const EXTERNAL_ID_DESCRIPTION = "Your own id for the message (a CRM's): unique among the owner's live messages of this kind";
const METADATA_DESCRIPTION = `Your own strings, echoed in every event about the message and its deliveries: at most ${MAX_METADATA_KEYS} keys of at most ${MAX_METADATA_KEY} characters, values of at most ${MAX_METADATA_VALUE} characters, ${MAX_METADATA_BYTES} bytes in all as JSON`;

export const ExternalIdOut = Nullable(Type.String({ description: EXTERNAL_ID_DESCRIPTION }));
export const MetadataOut = Type.Object({}, { additionalProperties: Type.String(), description: METADATA_DESCRIPTION });

/** The two writable correlation fields of a message body. */
export const CorrelationFields = {
  external_id: Nullable(Type.String({ minLength: 1, maxLength: 255, description: EXTERNAL_ID_DESCRIPTION })),
  metadata: Nullable(
    Type.Object(
      {},
      {
        additionalProperties: Type.String({ maxLength: MAX_METADATA_VALUE }),
        maxProperties: MAX_METADATA_KEYS,
        propertyNames: { minLength: 1, maxLength: MAX_METADATA_KEY },
        description: `${METADATA_DESCRIPTION}. null clears it; on update it replaces the whole object.`,
      },
    ),
  ),
};

/**
 * The columns a body's correlation fields write (already checked by the schema, but for the size
 * of the whole). A null metadata is the empty object.
 */
export function correlationChanges(
  body: { external_id?: string | null; metadata?: object | null },
  errors: FieldErrors,
): { external_id?: string | null; metadata?: string } {
  const changes: { external_id?: string | null; metadata?: string } = {};
  if (body.external_id !== undefined) changes.external_id = body.external_id;
  if (body.metadata !== undefined) {
    const json = JSON.stringify(body.metadata ?? {});
    const size = Buffer.byteLength(json);
    if (size > MAX_METADATA_BYTES) errors.metadata = [`must be at most ${MAX_METADATA_BYTES} bytes as JSON (it is ${size})`];
    else changes.metadata = json;
  }
  return changes;
}
