import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { App } from '../../src/http/fastify-types.ts';
import { createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * A fuzzer driven by the API's own description (`/v3/openapi.json`): for every operation it sends
 * requests that are wrong in the ways clients get them wrong — wrong types, missing and unknown
 * fields, huge and NUL strings, bad ids, duplicated query parameters, wrong content types, bodies
 * that are not JSON — as an Administrator and as a User, and asserts that no answer is a 5xx and
 * that every error is problem+json (no body at all for HEAD) without a stack trace or SQL.
 *
 * Bounded in the suite (FUZZ_CASES, default 1,500 requests); `npm run fuzz` runs 20,000. The
 * generator is seeded (FUZZ_SEED, printed), so a failing run can be repeated exactly.
 */
const CASES = Number(process.env.FUZZ_CASES ?? 1500);
const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));

/** mulberry32: small, fast, good enough to spread cases. */
function random(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
  };
}
type Random = ReturnType<typeof random>;

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  $ref?: string;
  format?: string;
}
interface Operation {
  method: string;
  path: string;
  parameters: { name: string; in: string; schema?: Schema }[];
  body: Schema | undefined;
  bodyTypes: string[];
}

const HUGE = 'x'.repeat(100_000);
const STRINGS = [
  '',
  ' ',
  'a',
  HUGE,
  'nul\u0000byte',
  '\u0000',
  '💥'.repeat(300),
  '<script>alert(1)</script>',
  "' OR 1=1 --",
  '%00',
  '../../etc/passwd',
  '\uD800',
];
const NUMBERS = [0, -1, 1, 1.5, 2 ** 31, 2 ** 53, -(2 ** 63), 1e308, Number.MAX_SAFE_INTEGER + 2];
const IDS = ['0', '-1', 'abc', '1e3', ' 7', '99999999999999999999', '1.0', '%00', 'x'.repeat(600), '1;x', '%2e%2e', '0x10', '١٢'];

/** A value of any JSON type, sometimes deep or big. */
function anyValue(r: Random, depth = 0): unknown {
  switch (r.int(depth > 2 ? 5 : 7)) {
    case 0:
      return r.pick(STRINGS);
    case 1:
      return r.pick(NUMBERS);
    case 2:
      return r.pick([true, false]);
    case 3:
      return null;
    case 4:
      return r.pick(['2024-02-30T25:00:00Z', 'not-a-date', 'user@', 'https://', '+1', 'Administrator']);
    case 5:
      return Array.from({ length: r.int(4) }, () => anyValue(r, depth + 1));
    default:
      return Object.fromEntries(
        Array.from({ length: r.int(4) }, () => [
          r.pick(['a', 'id', '__proto__', 'constructor', HUGE.slice(0, 300)]),
          anyValue(r, depth + 1),
        ]),
      );
  }
}

/** A plausible value of a schema (so that other fields' faults are what gets tested). */
function valid(schema: Schema | undefined, r: Random, resolve: (s: Schema) => Schema): unknown {
  const s = schema ? resolve(schema) : {};
  if (s.enum) return r.pick(s.enum);
  const variants = s.anyOf ?? s.oneOf;
  if (variants) return valid(r.pick(variants), r, resolve);
  const type = Array.isArray(s.type) ? r.pick(s.type) : s.type;
  switch (type) {
    case 'integer':
      return 1 + r.int(3);
    case 'number':
      return 1;
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array':
      return [valid(s.items, r, resolve)];
    case 'object':
      return Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, valid(v, r, resolve)]));
    default:
      return s.format === 'email' ? `f${r.int(1e6)}@example.test` : 'Fuzz';
  }
}

/** A body that is wrong in one or a few ways. */
function badBody(op: Operation, r: Random, resolve: (s: Schema) => Schema): unknown {
  const schema = op.body ? resolve(op.body) : {};
  const base = valid(schema, r, resolve) as Record<string, unknown>;
  const fields = Object.keys(schema.properties ?? {});
  switch (r.int(8)) {
    case 0:
      return {};
    case 1:
      return anyValue(r);
    case 2: {
      if (fields.length === 0) return { unknown_field: 1 };
      const body = typeof base === 'object' && base ? { ...base } : {};
      for (let i = 0; i <= r.int(3); i++) (body as Record<string, unknown>)[r.pick(fields)] = anyValue(r);
      return body;
    }
    case 3:
      return {
        ...(typeof base === 'object' ? base : {}),
        [r.pick(['unknown', 'id', 'created_at', 'user_id', 'status', 'hop_x'])]: anyValue(r),
      };
    case 4: {
      const body = typeof base === 'object' && base ? { ...base } : {};
      if (fields.length) delete (body as Record<string, unknown>)[r.pick(fields)];
      return body;
    }
    case 5:
      return Object.fromEntries(fields.map((f) => [f, r.pick(STRINGS)]));
    case 6:
      return [base];
    default:
      return base;
  }
}

function operations(document: { paths: Record<string, Record<string, Record<string, unknown>>> }): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, raw] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete', 'head'].includes(method)) continue;
      const op = raw as { parameters?: Operation['parameters']; requestBody?: { content?: Record<string, { schema?: Schema }> } };
      const content = op.requestBody?.content ?? {};
      const bodyTypes = Object.keys(content);
      ops.push({
        method: method.toUpperCase(),
        path,
        parameters: op.parameters ?? [],
        body: content['application/json']?.schema ?? Object.values(content)[0]?.schema,
        bodyTypes,
      });
    }
  }
  return ops;
}

/** Percent-encodes; a lone surrogate becomes the invalid UTF-8 it would be on the wire. */
function enc(value: string): string {
  try {
    return encodeURIComponent(value);
  } catch {
    return '%ED%A0%80';
  }
}

function buildRequest(op: Operation, r: Random, resolve: (s: Schema) => Schema) {
  // Existing ids (1–3) half the time — except where acting on them would lock the fuzzer out
  // (revoking its keys, cancelling its users), which get ids that exist nowhere.
  const destructive = (op.method === 'DELETE' && op.path.startsWith('/v3/api_keys')) || op.path.endsWith('/cancel');
  const path = op.path.replace(/\{(\w+)\}/g, () =>
    r.next() < 0.5 ? String(destructive ? 900_000 + r.int(1000) : 1 + r.int(3)) : enc(r.pick(IDS)),
  );
  const query: string[] = [];
  for (const param of op.parameters.filter((p) => p.in === 'query')) {
    const roll = r.next();
    if (roll < 0.5) continue;
    const value = roll < 0.7 ? String(valid(param.schema, r, resolve)) : String(anyValue(r));
    query.push(`${enc(param.name)}=${enc(value)}`);
    if (r.next() < 0.2) query.push(`${enc(param.name)}=${enc(String(anyValue(r)))}`); // duplicated
  }
  if (r.next() < 0.2)
    query.push(`${r.pick(['unknown', 'page', 'per_page', 'sort', 'q'])}=${enc(r.pick([...STRINGS.slice(0, 6), '-1', '1e9']))}`);
  if (r.next() < 0.05) query.push(`q=${'y'.repeat(20_000)}`);
  const url = `${path}${query.length ? `?${query.join('&')}` : ''}`;
  const headers: Record<string, string> = {};
  let payload: string | undefined;
  if (op.method === 'POST' || op.method === 'PUT' || op.method === 'PATCH' || r.next() < 0.1) {
    const kind = r.int(10);
    if (kind < 6) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(badBody(op, r, resolve));
    } else if (kind === 6) {
      headers['content-type'] = 'application/json';
      payload = r.pick(['{', '{"a":', 'null', '[]', '"x"', '{"a":1}{', '\u0000', '{"a":"\\u0000"}', `{"a":"${HUGE}"}`]);
    } else if (kind === 7) {
      headers['content-type'] = r.pick([
        'text/plain',
        'application/xml',
        'application/x-www-form-urlencoded',
        'application/json; charset=latin1',
        'application/jsonx',
      ]);
      payload = 'a=1&b=2';
    } else if (kind === 8) {
      headers['content-type'] = r.pick(['multipart/form-data', 'multipart/form-data; boundary=xyz']);
      payload = '--xyz\r\nContent-Disposition: form-data; name="file"\r\n\r\nhello\r\n--xyz--';
    } else {
      payload = JSON.stringify(valid(op.body, r, resolve));
    }
  }
  return { method: op.method, url, headers, payload };
}

async function fetchDocument(app: App, key: string) {
  const reply = await app.inject({ method: 'GET', url: '/v3/openapi.json', headers: { authorization: `Bearer ${key}` } });
  assert.equal(reply.statusCode, 200);
  return JSON.parse(reply.body);
}

describe('fuzzing every operation of /v3/openapi.json', () => {
  let t: TestApp;
  let userKey: string;
  before(async () => {
    t = await startTestApp();
    userKey = (await createUser(t, 'User')).key;
  });
  after(() => t.close());

  test(`${CASES} malformed requests: no 5xx, every error problem+json (seed ${SEED})`, async (tc) => {
    const document = await fetchDocument(t.app, t.adminKey);
    const schemas: Record<string, Schema> = document.components?.schemas ?? {};
    const resolve = (s: Schema): Schema => {
      let current = s;
      for (let i = 0; i < 10 && current.$ref; i++) current = schemas[current.$ref.split('/').pop() ?? ''] ?? {};
      return current;
    };
    const ops = operations(document);
    assert.ok(ops.length >= 40, `the document lists the operations (${ops.length})`);
    const r = random(SEED);
    const byStatus = new Map<number, number>();
    const failures: string[] = [];
    for (let i = 0; i < CASES; i++) {
      // Every operation in turn, so each is hit CASES / operations times.
      const op = ops[i % ops.length]!;
      const request = buildRequest(op, r, resolve);
      const key = r.next() < 0.15 ? r.pick([undefined, 'hop_bogus', `${t.adminKey.slice(0, -1)}x`]) : r.next() < 0.5 ? t.adminKey : userKey;
      const reply = await t.app.inject({
        method: request.method as 'GET',
        url: request.url,
        headers: { ...request.headers, ...(key ? { authorization: `Bearer ${key}` } : {}) },
        payload: request.payload,
      });
      byStatus.set(reply.statusCode, (byStatus.get(reply.statusCode) ?? 0) + 1);
      const type = String(reply.headers['content-type'] ?? '');
      const what = `${request.method} ${request.url.slice(0, 200)} ${request.headers['content-type'] ?? ''} ${(request.payload ?? '').slice(0, 200)}`;
      // A provider's webhook this server has no secret for answers 503 by design (the provider retries).
      const designed = reply.statusCode === 503 && reply.body.includes('/problems/webhook_not_configured"');
      if (reply.statusCode >= 500 && !designed) failures.push(`${reply.statusCode} for ${what}: ${reply.body.slice(0, 300)}`);
      else if (
        reply.statusCode >= 400 &&
        request.method !== 'HEAD' &&
        !type.startsWith('application/problem+json') &&
        !type.startsWith('text/html')
      ) {
        failures.push(`${reply.statusCode} not problem+json (${type}) for ${what}`);
      } else if (reply.statusCode >= 400 && request.method !== 'HEAD' && type.startsWith('application/problem+json')) {
        const body = JSON.parse(reply.body);
        if (body.status !== reply.statusCode || typeof body.detail !== 'string')
          failures.push(`malformed problem for ${what}: ${reply.body.slice(0, 200)}`);
        if (/\bat .*\.ts:\d+|SELECT |INSERT |hop_[0-9A-Za-z]{46}/.test(reply.body))
          failures.push(`leak for ${what}: ${reply.body.slice(0, 300)}`);
      }
      if (request.method === 'HEAD' && reply.body !== '') failures.push(`HEAD with a body for ${what}`);
      if (failures.length >= 10) break;
    }
    tc.diagnostic(`seed ${SEED}; ${ops.length} operations; answers by status: ${JSON.stringify(Object.fromEntries([...byStatus].sort()))}`);
    assert.deepEqual(failures, []);
  });
});

describe('field names that are Object.prototype members', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('a body field called constructor, __proto__ or toString is a 400 naming it, never a 500', async () => {
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      for (const url of ['/v3/users', '/v3/teams', `/v3/users/${t.adminId}/api_keys`]) {
        const reply = await t.app.inject({
          method: 'POST',
          url,
          headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
          payload: `{"${name}": null}`,
        });
        assert.equal(reply.statusCode, 400, `${name} on ${url}: ${reply.body}`);
        assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
      }
    }
  });
});
