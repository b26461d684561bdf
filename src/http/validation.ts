import { isDeepStrictEqual } from 'node:util';
import { Ajv, type Options, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import fastJsonStringify, { type Options as SerializerOptions } from 'fast-json-stringify';
import type { FastifySchemaCompiler } from 'fastify';
import { DomainError, type FieldErrors, validationError } from '../errors.ts';

const shared: Options = { allErrors: true, removeAdditional: false, useDefaults: true, verbose: true, strict: false };

// JSON bodies are taken as typed: "5" is not an integer. Path and query values are text on the
// wire, so those are coerced, and a single query value becomes a one-element array.
const bodyAjv = addFormats.default(new Ajv({ ...shared, coerceTypes: false }));
const textAjv = addFormats.default(new Ajv({ ...shared, coerceTypes: 'array' }));

/**
 * Each route's validators are compiled when first used rather than when the route is registered:
 * compiling those of all 70-odd operations took about a fifth of a start's CPU (docs/performance.md).
 * Fastify reads `errors` off the function it was given, so the compiled function's are copied.
 */
export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  let compiled: ValidateFunction | undefined;
  const validate = (data: unknown) => {
    compiled ??= (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object);
    const valid = compiled(data);
    validate.errors = compiled.errors;
    return valid;
  };
  validate.errors = null as ValidateFunction['errors'];
  return validate;
};

const bodyChecks = new WeakMap<object, ValidateFunction>();

/**
 * A body checked against a route's own body schema outside a route (the web pages' forms build
 * the API's body and call the same domain function): refused with the API's validation messages.
 */
export function checkBody(schema: object, body: unknown): void {
  const validate = bodyCheck(schema);
  if (!validate(body)) throw toValidationError((validate.errors ?? []) as SchemaError[], 'body');
}

/**
 * A body's problems against a schema, by field, in the API's words; undefined for a valid one.
 * A bulk import checks each row so (its refused rows say why, the others are imported).
 */
export function bodyErrors(schema: object, body: Record<string, unknown>): FieldErrors | undefined {
  const validate = bodyCheck(schema);
  return validate(body) ? undefined : toValidationError((validate.errors ?? []) as SchemaError[], undefined).errors;
}

function bodyCheck(schema: object): ValidateFunction {
  let validate = bodyChecks.get(schema);
  if (!validate) {
    validate = bodyAjv.compile(schema);
    bodyChecks.set(schema, validate);
  }
  return validate;
}

/**
 * Fastify's response serializers: `JSON.stringify`. Every handler builds its answer in the shape
 * of its response schema (the `toApi…` functions: one place per resource), so the schema's own
 * serializer (fast-json-stringify, which Fastify builds by default) wrote the same text — while
 * leaving a dozen intermediate strings per field behind it: 16 kB of search page made about 70 kB
 * of garbage, and with 32 requests in flight that garbage outlived the young generation and cost
 * a fifth of a search's CPU (docs/performance.md). `JSON.stringify` writes the text in one go.
 *
 * With `checked` (the tests' applications, test/support/test-app.ts), every answer is written
 * both ways and must be the same document: nothing the schema leaves out, nothing it requires
 * missing, no value it would coerce. Only the order of an object's fields may differ (a stored
 * webhook payload is shown as it was posted). The schemas' serializers are then compiled on a
 * route's first answer with that status, as a start need not pay for them.
 */
export function responseSerializers(checked: boolean) {
  return (externalSchemas?: unknown, serializerOpts?: SerializerOptions) => {
    if (!checked) return () => JSON.stringify;
    const options = { ...serializerOpts, schema: externalSchemas as SerializerOptions['schema'] };
    return ({ schema }: { schema?: unknown }) => {
      // As Fastify does: a route schema that is itself a shared schema is not given again as external.
      const id = (schema as { $id?: string }).$id;
      const own =
        id && options.schema?.[id]
          ? { ...options, schema: Object.fromEntries(Object.entries(options.schema).filter(([key]) => key !== id)) }
          : options;
      let bySchema: ((data: unknown) => string) | undefined;
      return (data: unknown) => {
        bySchema ??= fastJsonStringify(schema as object, own);
        const expected = bySchema(data);
        const text = JSON.stringify(data);
        if (text !== expected && !isDeepStrictEqual(JSON.parse(text), JSON.parse(expected))) {
          throw new Error(`the answer is not its response schema's document:\n${text}\nthe schema's:\n${expected}`);
        }
        return text;
      };
    };
  };
}

const TYPE_NAMES: Record<string, string> = {
  integer: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'a boolean',
  array: 'an array',
  object: 'an object',
  null: 'null',
};

/** Turns Ajv's errors into `{field: ["what is wrong"]}`, field paths in dot notation. */
/** What Hopper reads of one Ajv error (Fastify passes them on as `error.validation`). */
interface SchemaError {
  keyword: string;
  /** The value refused (Ajv's `verbose`). */
  data?: unknown;
  instancePath: string;
  params: Record<string, unknown>;
  parentSchema?: unknown;
  /** Set when the error is about an object's key rather than its value (`propertyNames`). */
  propertyName?: string;
}

export function toValidationError(errors: readonly SchemaError[], context: string | undefined): DomainError {
  // No prototype: a client's field may be called `constructor` or `__proto__`.
  const fields: FieldErrors = Object.create(null);
  const add = (field: string, message: string) => {
    const key = field || context || 'body';
    const list = Object.hasOwn(fields, key) ? (fields[key] as string[]) : [];
    if (!list.includes(message)) list.push(message);
    fields[key] = list;
  };
  for (const error of errors) {
    // The body itself is not an object (an array, a string): no field is wrong, the whole is.
    if (error.instancePath === '' && error.keyword === 'type' && (context === 'body' || context === undefined)) {
      return new DomainError('bad_request', `The request body must be a JSON object, not ${jsonKind(error.data)}.`);
    }
    let path = error.instancePath.slice(1).replaceAll('/', '.');
    // A query parameter given once is read as a list of one: its errors name the parameter, not `status.0`.
    if (context === 'querystring') path = path.replace(/\.\d+$/, '');
    const join = (name: string) => (path ? `${path}.${name}` : name);
    const params = error.params as Record<string, unknown>;
    switch (error.keyword) {
      case 'required':
        add(join(String(params.missingProperty)), 'is required');
        break;
      case 'additionalProperties': {
        const name = String(params.additionalProperty);
        if (context === 'querystring') {
          const known = Object.keys((error.parentSchema as { properties?: object })?.properties ?? {});
          add(name, `is not a known parameter; allowed: ${known.join(', ')}`);
        } else {
          add(join(name), 'is not a known field');
        }
        break;
      }
      case 'propertyNames':
        // Its own error, about the key, says what is wrong.
        break;
      default:
        if (error.propertyName !== undefined) {
          const key = error.propertyName.length > 50 ? `${error.propertyName.slice(0, 50)}…` : error.propertyName;
          add(path, `key ${JSON.stringify(key)}: ${describe(error)}`);
        } else add(path, describe(error));
    }
  }
  return validationError(fields);
}

function jsonKind(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (value === null) return 'null';
  return typeof value === 'string'
    ? 'a string'
    : typeof value === 'number'
      ? 'a number'
      : typeof value === 'boolean'
        ? 'a boolean'
        : 'that';
}

function describe(error: SchemaError): string {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'type': {
      const types = String(params.type).split(',');
      return `must be ${types.map((t) => TYPE_NAMES[t] ?? t).join(' or ')}`;
    }
    case 'enum':
      return `must be one of: ${(params.allowedValues as unknown[]).join(', ')}`;
    case 'const':
      return `must be ${JSON.stringify(params.allowedValue)}`;
    case 'maxLength':
      return `must be at most ${params.limit} characters`;
    case 'minLength':
      return params.limit === 1 ? 'must not be empty' : `must be at least ${params.limit} characters`;
    case 'maximum':
      return `must be at most ${params.limit}`;
    case 'minimum':
      return `must be at least ${params.limit}`;
    case 'maxItems':
      return `must have at most ${params.limit} items`;
    case 'maxProperties':
      return `must have at most ${params.limit} keys`;
    case 'minItems':
      return `must have at least ${params.limit} items`;
    case 'uniqueItems':
      return 'must not repeat an item';
    case 'pattern':
      return 'has an invalid format';
    case 'format':
      return params.format === 'email' ? 'must be a valid email address' : `must be a valid ${params.format}`;
    default:
      return 'is invalid';
  }
}
