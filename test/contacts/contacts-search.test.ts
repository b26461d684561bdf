import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { assertPaging, idsOf } from '../support/paging.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { CONTACT, createContact } from './fixtures.ts';

const NAMES = ['Alice', 'Bob', 'Carol', 'Dave', 'Eve', 'Frank', 'Grace', 'Heidi', 'Ivan', 'Judy'];
const MORE = ['Mallory', 'Natalie', 'Oscar', 'Peggy', 'Rupert', 'Sybil', 'Trent', 'Victor', 'Walter', 'Zed'];

interface Row {
  id: number;
  first_name: string;
  email: string;
  phone: string;
  time_zone: string;
  status: string;
  tags: string[];
}

describe('contact search', () => {
  let t: TestApp;
  let owner: Actor;
  let client: ReturnType<typeof asKey>;
  let rows: Row[];
  let url: string;
  let deletedId: number;
  let strangerId: number;
  const ids = (keep: (row: Row) => boolean) => rows.filter(keep).map((row) => row.id);

  before(async () => {
    t = await startTestApp();
    owner = await createUser(t, 'User', await createTeam(t));
    client = asKey(t.app, owner.key);
    url = `/v3/users/${owner.id}/contacts`;
    rows = [];
    for (const [i, first_name] of [...NAMES, ...MORE].entries()) {
      rows.push(
        await createContact(client, owner.id, {
          first_name,
          email: `${first_name.toLowerCase()}@${i % 2 ? 'example.com' : 'corp.test'}`,
          phone: `${i < 10 ? '72723291' : '81323210'}${String(i).padStart(2, '0')}`,
          time_zone: i % 3 === 0 ? 'America/Chicago' : 'America/New_York',
          status: i % 5 === 0 ? 'Unsubscribed' : i % 7 === 0 ? 'Inactive - Hard Bounce' : 'Subscribed',
          tags: i % 4 === 0 ? ['Sphere', 'Buyers'] : [],
        }),
      );
    }
    const deleted = await createContact(client, owner.id, { first_name: 'Alfred', status: 'Unsubscribed' });
    deletedId = deleted.id;
    assert.equal((await client.delete(`/v3/contacts/${deletedId}`)).status, 200);
    const stranger = await createUser(t, 'User', await createTeam(t));
    strangerId = (await createContact(asKey(t.app, stranger.key), stranger.id, { first_name: 'Alice', status: 'Unsubscribed' })).id;
  });
  after(() => t.close());

  test('pages 1, 2 and 3 at per_page 7, then an empty page', async () => {
    await assertPaging(
      client,
      url,
      rows.map((r) => r.id),
      7,
      CONTACT,
    );
  });

  test('15 a page by default; per_page up to 100', async () => {
    const first = await client.get(url);
    assert.equal(first.body.meta.per_page, 15);
    assert.deepEqual(idsOf(first), ids(() => true).slice(0, 15));
    assert.deepEqual(idsOf(await client.get(`${url}?page=2`)), ids(() => true).slice(15));
    assert.equal((await client.get(`${url}?per_page=100`)).body.data.length, 20);
    assert.deepEqual(idsOf(await client.get(`${url}?per_page=1&page=20`)), [rows[19]?.id]);
  });

  test('rows carry their tags', async () => {
    const page = await client.get(`${url}?per_page=4`);
    assert.deepEqual(
      page.body.data.map((c: Row) => c.tags),
      [['Buyers', 'Sphere'], [], [], []],
    );
  });

  test('each filter kind: ids and enums exact, text a case-insensitive substring', async () => {
    const b = rows[1];
    assert.deepEqual(idsOf(await client.get(`${url}?id=${b?.id}`)), [b?.id]);
    assert.deepEqual(
      idsOf(await client.get(`${url}?first_name=AL`)),
      ids((r) => /al/i.test(r.first_name)),
    );
    assert.deepEqual(idsOf(await client.get(`${url}?last_name=zzz`)), []);
    assert.deepEqual(
      idsOf(await client.get(`${url}?email=CORP.test`)),
      ids((r) => r.email.endsWith('corp.test')),
    );
    assert.deepEqual(
      idsOf(await client.get(`${url}?phone=813`)),
      ids((r) => r.phone.startsWith('813')),
    );
    assert.deepEqual(
      idsOf(await client.get(`${url}?time_zone=America/Chicago`)),
      ids((r) => r.time_zone === 'America/Chicago'),
    );
    assert.deepEqual(idsOf(await client.get(`${url}?time_zone=Chicago`)), [], 'time_zone matches exactly');
    assert.deepEqual(
      idsOf(await client.get(`${url}?status=Unsubscribed`)),
      ids((r) => r.status === 'Unsubscribed'),
    );
  });

  test('filters are OR-ed, across parameters and within a repeated one', async () => {
    const [a, , c] = rows;
    assert.deepEqual(idsOf(await client.get(`${url}?id=${a?.id}&id=${c?.id}`)), [a?.id, c?.id]);
    assert.deepEqual(
      idsOf(await client.get(`${url}?status=Unsubscribed&first_name=zed`)),
      ids((r) => r.status === 'Unsubscribed' || r.first_name === 'Zed'),
    );
    assert.deepEqual(
      idsOf(await client.get(`${url}?status=Unsubscribed&status=${encodeURIComponent('Inactive - Hard Bounce')}`)),
      ids((r) => r.status !== 'Subscribed'),
    );
  });

  test('paging a filtered search: links keep the filters', async () => {
    await assertPaging(
      client,
      `${url}?email=corp.test&status=${encodeURIComponent('Inactive - Hard Bounce')}`,
      ids((r) => r.email.endsWith('corp.test') || r.status === 'Inactive - Hard Bounce'),
      4,
      CONTACT,
    );
  });

  test('deleted contacts and other users’ contacts never appear', async () => {
    assert.deepEqual(idsOf(await client.get(`${url}?id=${deletedId}`)), []);
    assert.ok(!idsOf(await client.get(`${url}?first_name=alfred&status=Unsubscribed`)).includes(deletedId));
    assert.deepEqual(idsOf(await client.get(`${url}?id=${strangerId}`)), []);
    assert.equal((await client.get(`${url}?per_page=100`)).body.meta.total, 20);
  });

  test('LIKE wildcards in a text filter match themselves', async () => {
    assert.deepEqual(idsOf(await client.get(`${url}?first_name=%25`)), []);
    assert.deepEqual(idsOf(await client.get(`${url}?first_name=_`)), []);
  });

  test('unknown filters and bad values are 400s naming the parameter', async () => {
    for (const name of ['nickname', 'tags', 'user_id', 'full_name']) {
      const reply = await client.get(`${url}?${name}=x`);
      assertProblem(reply, 400, 'validation');
      assert.match(reply.body.errors[name][0], /is not a known parameter; allowed: .*first_name.*status/);
    }
    const bad: [string, string][] = [
      ['id', 'abc'],
      ['id', '0'],
      ['id', '99999999999999999999'],
      ['status', 'Active'],
      ['first_name', ''],
      ['email', 'x'.repeat(256)],
      ['page', '0'],
      ['page', '-1'],
      ['page', 'two'],
      ['per_page', '0'],
      ['per_page', '101'],
    ];
    for (const [name, value] of bad) {
      const reply = await client.get(`${url}?${name}=${value}`);
      assertProblem(reply, 400, 'validation');
      assert.ok(
        Object.keys(reply.body.errors).some((k) => k.startsWith(name)),
        `${name}=${value}: ${reply.raw}`,
      );
    }
  });
});
