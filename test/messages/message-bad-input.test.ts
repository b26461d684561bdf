import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey, type Reply } from '../support/client.ts';
import { type Actor, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { type Client, createMessage, KINDS } from './fixtures.ts';

const TOO_MANY = Array.from({ length: 1001 }, () => ({ group: 'Tags', value: 1 }));
const RECIPIENTS = ['Tags', {}, [1], [{ group: 'Tags', value: '1' }], [{ group: 'Tags', value: 1.5 }], [{ value: 1 }], null, TOO_MANY];
const SHARED: Record<string, unknown[]> = {
  status: [5, null, [], true],
  send_type: [5, null, {}],
  send_at: [5, true, {}, 'soon', '2099-01-01T25:00:00Z'],
  recipients: RECIPIENTS,
};
/** Values of the wrong type or form for every body field, per resource. */
const WRONG: Record<string, Record<string, unknown[]>> = {
  voicemail_drops: {
    ...SHARED,
    provider: [5, true, [], {}, null],
    media_id: ['5', 1.5, -3, 0, { id: 1 }, 9_007_199_254_740_992, null],
    callback_number: [7272329117, [], null, 'x'.repeat(33)],
    name: [5, true, [], {}, null],
    description: [5, [], {}],
    reason: [5, {}],
  },
  templated_emails: {
    ...SHARED,
    templated_message_id: ['1', 1.5, 0, -1, {}],
    subject: [5, null, []],
    description: [5, null, 'd'.repeat(4097)],
    greeting_with_first_name: [null, 5],
    greeting_without_first_name: [null, []],
    body: [5, null, {}],
    closing: [null, 5, 'c'.repeat(1025)],
    ps_line: [null, 5, 'p'.repeat(1025)],
    signature_id: ['1', 1.5, 0, 9_007_199_254_740_992],
    exclusions: ['x', [{}], TOO_MANY],
  },
};

/** Hostile and malformed input on every message endpoint: always a clear 4xx problem, never a 500. */
describe('message bad input', () => {
  let t: TestApp;
  let owner: Actor;
  let client: Client;
  before(async () => {
    t = await startTestApp();
    owner = await createUser(t, 'User');
    client = asKey(t.app, owner.key);
  });
  after(() => t.close());

  function assertClientError(reply: Reply, what: string, status: number): void {
    assert.equal(reply.status, status, `${what}: ${reply.raw.slice(0, 400)}`);
    assert.match(String(reply.headers['content-type']), /^application\/problem\+json/, what);
    assert.ok(reply.body.message.length > 0, what);
    assert.doesNotMatch(reply.raw, /SELECT|INSERT|UPDATE |\.ts:\d/, what);
  }

  for (const kind of KINDS) {
    describe(kind.label, () => {
      let valid: Record<string, unknown>;
      let id: number;
      const endpoints = () => [
        { method: 'POST' as const, url: `/v3/users/${owner.id}/${kind.collection}`, base: valid },
        { method: 'PUT' as const, url: `/v3/${kind.collection}/${id}`, base: {} },
      ];
      before(async () => {
        valid = await kind.validBody(t, owner);
        id = (await createMessage(t, kind, owner)).id;
      });

      test('wrong types and forms on every body field name the field', async () => {
        for (const { method, url, base } of endpoints()) {
          for (const [field, values] of Object.entries(WRONG[kind.collection] ?? {})) {
            for (const value of values) {
              const what = `${method} ${field}=${JSON.stringify(value)?.slice(0, 60)}`;
              const reply = await client.send(method, url, { ...base, [field]: value });
              assertClientError(reply, what, 400);
              assert.ok(
                Object.keys(reply.body.errors ?? {}).some((k) => k === field || k.startsWith(`${field}.`)),
                `${what}: names ${field}: ${reply.raw.slice(0, 300)}`,
              );
            }
          }
        }
      });

      test('missing and unknown fields, bodies that are not JSON objects, 10 MB bodies', async () => {
        for (const { method, url, base } of endpoints()) {
          const unknown = await client.send(method, url, { ...base, surprise: 1, 'nested.key': 2 });
          assertClientError(unknown, `${method} unknown`, 400);
          assert.deepEqual(unknown.body.errors.surprise, ['is not a known field']);
          for (const body of ['[]', '"text"', '42', 'null', 'true', '[{}]']) {
            assertClientError(await client.send(method, url, body, { 'content-type': 'application/json' }), `${method} ${body}`, 400);
          }
          assertClientError(
            await client.send(method, url, '{"name": ', { 'content-type': 'application/json' }),
            `${method} broken JSON`,
            400,
          );
          assertClientError(
            await client.send(method, url, 'name=x', { 'content-type': 'application/x-www-form-urlencoded' }),
            `${method} form`,
            415,
          );
          assertClientError(await client.send(method, url, '{}', { 'content-type': 'text/plain' }), `${method} text`, 415);
          const huge = JSON.stringify({ ...base, [kind.textField]: 'x'.repeat(10 * 1024 * 1024) });
          assertClientError(await client.send(method, url, huge, { 'content-type': 'application/json' }), `${method} 10 MB`, 413);
          assertClientError(
            await client.send(method, url, JSON.stringify({ ...base, [kind.textField]: 'a\u0000b' }), {
              'content-type': 'application/json',
            }),
            `${method} NUL`,
            400,
          );
        }
        const [create] = endpoints();
        const missing = await client.post(create!.url, {});
        assertClientError(missing, 'POST {}', 400);
        assert.ok(
          Object.values(missing.body.errors).some((m) => (m as string[]).some((text) => /required/.test(text))),
          missing.raw,
        );
        assertClientError(await client.send('POST', create!.url, '', { 'content-type': 'application/json' }), 'POST no body', 400);
        assert.equal((await client.get(`/v3/${kind.collection}/${id}`)).status, 200, 'the message survived');
      });

      test('ids that are not positive integers or overflow are 400 on every endpoint', async () => {
        for (const bad of ['abc', '0', '-1', '1.5', '99999999999999999999', '9007199254740992', '%20', '1;DROP']) {
          const what = (m: string) => `${m} id=${bad}`;
          assertClientError(await client.get(`/v3/${kind.collection}/${bad}`), what('GET'), 400);
          assertClientError(await client.put(`/v3/${kind.collection}/${bad}`, {}), what('PUT'), 400);
          assertClientError(await client.delete(`/v3/${kind.collection}/${bad}`), what('DELETE'), 400);
          assertClientError(await client.get(`/v3/users/${bad}/${kind.collection}`), what('search'), 400);
          assertClientError(await client.post(`/v3/users/${bad}/${kind.collection}`, valid), what('create'), 400);
        }
        assertClientError(await client.send('PATCH', `/v3/${kind.collection}/${id}`, {}), 'PATCH', 405);
      });

      test('SQL and HTML in strings are stored verbatim', async () => {
        const texts = [
          "'; DROP TABLE voicemail_drops; --",
          '<script>alert(1)</script>',
          'Robert"); DELETE FROM users; --',
          '😀 Ünïcödé \\ %_',
        ];
        for (const text of texts) {
          const fields =
            kind.collection === 'voicemail_drops' ? { name: text, description: text } : { subject: text, description: text, closing: text };
          const reply = await client.post(`/v3/users/${owner.id}/${kind.collection}`, { ...valid, ...fields });
          assert.equal(reply.status, 201, reply.raw);
          const read = await client.get(`/v3/${kind.collection}/${reply.body.id}`);
          for (const [field, value] of Object.entries(fields)) assert.equal(read.body[field], value, `${field} verbatim`);
          const search = await client.get(`/v3/users/${owner.id}/${kind.collection}?${kind.textField}=${encodeURIComponent(text)}`);
          assert.ok(
            search.body.data.some((m: { id: number }) => m.id === reply.body.id),
            `found by ${text}`,
          );
        }
        assert.equal((await client.get(`/v3/users/${owner.id}/${kind.collection}`)).status, 200, 'the table is still there');
      });
    });
  }
});
