import assert from 'node:assert/strict';
import { TIMESTAMP } from './factories.ts';

/**
 * Response shapes declared once per resource as `field → type` and checked exactly: the same
 * field set (nothing missing, nothing extra) and the JSON type of every value, nested objects
 * and arrays included. Types:
 *
 *   'integer' 'number' 'string' 'boolean' 'timestamp' (YYYY-MM-DDThh:mm:ssZ) 'url' (absolute) 'null'
 *   'string|null' …   any of them, or null
 *   'string[]' …      an array of them
 *   { … }             a nested object with its own shape
 *   arrayOf(t)        an array of any type, e.g. arrayOf({ group: 'string', value: 'integer' })
 *   nullable(t)       any type, or null, e.g. nullable({ id: 'integer' })
 */
type Scalar = 'integer' | 'number' | 'string' | 'boolean' | 'timestamp' | 'url';
export type FieldType = Scalar | 'null' | `${Scalar}|null` | `${Scalar}[]` | Shape | ArrayOf | Nullable;
export interface Shape {
  readonly [field: string]: FieldType;
}

class ArrayOf {
  readonly item: FieldType;
  constructor(item: FieldType) {
    this.item = item;
  }
}
class Nullable {
  readonly type: FieldType;
  constructor(type: FieldType) {
    this.type = type;
  }
}
export const arrayOf = (item: FieldType): FieldType => new ArrayOf(item);
export const nullable = (type: FieldType): FieldType => new Nullable(type);

/** Fails with the path of the first field that is missing, extra or of the wrong type. */
export function assertShape(value: unknown, shape: Shape, path = 'body'): void {
  assert.ok(isObject(value), `${path}: expected an object, got ${JSON.stringify(value)}`);
  const expected = Object.keys(shape).sort();
  const actual = Object.keys(value).sort();
  const missing = expected.filter((k) => !actual.includes(k));
  const extra = actual.filter((k) => !expected.includes(k));
  assert.ok(missing.length === 0 && extra.length === 0, `${path}: missing [${missing}], unexpected [${extra}]`);
  for (const field of expected) assertType(value[field], shape[field] as FieldType, `${path}.${field}`);
}

/** The collection envelope of a search, with every item checked against `item`. */
export function pageShape(item: Shape): Shape {
  return {
    data: arrayOf(item),
    links: { first: 'url', last: 'url', prev: 'url|null', next: 'url|null' },
    meta: {
      current_page: 'integer',
      from: 'integer|null',
      last_page: 'integer',
      path: 'url',
      per_page: 'integer',
      to: 'integer|null',
      total: 'integer',
    },
  };
}

function assertType(value: unknown, type: FieldType, path: string): void {
  if (type instanceof Nullable) {
    if (value !== null) assertType(value, type.type, path);
  } else if (type instanceof ArrayOf) {
    assert.ok(Array.isArray(value), `${path}: expected an array, got ${JSON.stringify(value)}`);
    for (const [index, item] of value.entries()) assertType(item, type.item, `${path}[${index}]`);
  } else if (typeof type !== 'string') {
    assertShape(value, type, path);
  } else if (type.endsWith('|null')) {
    if (value !== null) assertType(value, type.slice(0, -'|null'.length) as Scalar, path);
  } else if (type.endsWith('[]')) {
    assertType(value, new ArrayOf(type.slice(0, -2) as Scalar), path);
  } else {
    assert.ok(SCALARS[type as Scalar | 'null'](value), `${path}: expected ${type}, got ${JSON.stringify(value)}`);
  }
}

const SCALARS: Record<Scalar | 'null', (value: unknown) => boolean> = {
  integer: (v) => Number.isSafeInteger(v),
  number: (v) => typeof v === 'number' && Number.isFinite(v),
  string: (v) => typeof v === 'string',
  boolean: (v) => typeof v === 'boolean',
  timestamp: (v) => typeof v === 'string' && TIMESTAMP.test(v) && !Number.isNaN(Date.parse(v)),
  url: (v) => typeof v === 'string' && URL.canParse(v) && /^https?:\/\//.test(v),
  null: (v) => v === null,
};

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
