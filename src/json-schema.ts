import { type Static, type TSchema, Type } from 'typebox';

/**
 * Building blocks of the JSON schemas (TypeBox) that every resource module declares for its API
 * shape and bodies. The same schemas validate requests, serialise responses and make the OpenAPI
 * document.
 */

/** Largest id the API accepts: ids are JSON numbers, so they stay within 2^53. */
const MAX_ID = Number.MAX_SAFE_INTEGER;

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

export const Success = Type.Object({ success: Type.Boolean() });

/**
 * A body schema that ignores read-only fields (so a client can PUT back what it read) and refuses
 * fields that exist nowhere. Read-only names are accepted with any value and dropped in handlers.
 */
export function WritableBody<P extends Record<string, TSchema>>(properties: P, readOnly: readonly string[]) {
  const ignored = Object.fromEntries(readOnly.map((name) => [name, Type.Optional(Type.Unknown())]));
  return Type.Object({ ...properties, ...ignored } as P, { additionalProperties: false });
}
