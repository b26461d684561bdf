import { Type } from 'typebox';
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
