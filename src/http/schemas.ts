import { type Static, type TSchema, Type } from 'typebox';
import { PROBLEMS } from './problems.ts';

/** Largest id the API accepts: ids are JSON numbers, so they stay within 2^53. */
export const MAX_ID = Number.MAX_SAFE_INTEGER;

export const Id = Type.Integer({ minimum: 1, maximum: MAX_ID });

export const Timestamp = Type.String({
  description: 'ISO 8601 in UTC without fraction',
  examples: ['2026-07-12T16:56:00Z'],
});

/** A scalar schema that also accepts null, as one JSON-schema type list (clearer errors than anyOf). */
export function Nullable<T extends TSchema>(schema: T) {
  const base = schema as unknown as { type: string };
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [base.type, 'null'] });
}

/** One of a closed list of strings, as a plain JSON-schema `enum` (one clear error message). */
export function StringEnum<T extends readonly string[]>(values: T, options: object = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

export const IdParams = Type.Object({ id: Id }, { additionalProperties: false });
export const UserIdParams = Type.Object({ user_id: Id }, { additionalProperties: false });

export const Success = Type.Object({ success: Type.Boolean() });

export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    message: Type.String(),
    errors: Type.Optional(Type.Record(Type.String(), Type.Array(Type.String()))),
  },
  { $id: 'Problem', description: 'RFC 9457 problem details with Laravel-compatible members' },
);

/** The error responses a route can give, for the OpenAPI document and the serializer. */
export function problems(...statuses: number[]): Record<number, typeof Problem> {
  const known = new Set<number>(Object.values(PROBLEMS).map((p) => p.status));
  return Object.fromEntries(statuses.filter((s) => known.has(s)).map((s) => [s, Problem]));
}

/** Errors every authenticated route may answer with. */
export const AUTHENTICATED_ERRORS = [400, 401, 403, 404] as const;

/**
 * A body schema that ignores read-only fields (so a client can PUT back what it read) and refuses
 * fields that exist nowhere. Read-only names are accepted with any value and dropped in handlers.
 */
export function WritableBody<P extends Record<string, TSchema>>(properties: P, readOnly: readonly string[]) {
  const ignored = Object.fromEntries(readOnly.map((name) => [name, Type.Optional(Type.Unknown())]));
  return Type.Object({ ...properties, ...ignored } as P, { additionalProperties: false });
}

/** Picks the writable fields out of a validated body, leaving read-only ones behind. */
export function pickWritable<T extends object, K extends string>(body: T, writable: readonly K[]): Partial<Record<K, unknown>> {
  const out: Partial<Record<K, unknown>> = {};
  for (const key of writable) if (key in body) out[key] = (body as Record<string, unknown>)[key];
  return out;
}
