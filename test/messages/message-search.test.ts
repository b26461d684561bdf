import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createUser } from '../support/factories.ts';
import { assertPaging, idsOf } from '../support/paging.ts';
import { assertShape, pageShape } from '../support/shapes.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import {
  apiTime,
  audioMedia,
  type Client,
  createMessage,
  createSignature,
  createTemplate,
  DROPS,
  EMAILS,
  type MessageKind,
  VOICEMAIL_DROP,
} from './fixtures.ts';

type Row = Record<string, any>;
/** A filter query string and which rows it must find. */
type Case = [query: string, matches: (row: Row) => boolean];

const has = (text: unknown, part: string) => typeof text === 'string' && text.toLowerCase().includes(part.toLowerCase());

/**
 * Search on both message resources (docs/contacts.md, "Search"): 18 messages of varied fields, paged in id
 * order, every filter kind, OR within and across filters, bad parameters, deleted rows hidden.
 */
describe('message search', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  /** Seeds 18 messages for a fresh owner (plus a deleted one and a stranger's), returns them as read. */
  async function seed(kind: MessageKind, fieldsOf: (i: number) => Record<string, unknown>, given?: Actor) {
    const owner = given ?? (await createUser(t, 'User'));
    const client = asKey(t.app, owner.key);
    const ids: number[] = [];
    for (let i = 0; i < 18; i++) ids.push((await createMessage(t, kind, owner, fieldsOf(i))).id);
    const deleted = await createMessage(t, kind, owner, fieldsOf(0));
    assert.equal((await client.delete(`/v3/${kind.collection}/${deleted.id}`)).status, 200);
    // A stranger's message that matches the text filters must not show up.
    await createMessage(t, kind, await createUser(t, 'User'), { [kind.textField]: fieldsOf(0)[kind.textField] });
    return { owner, client, ids };
  }

  /** Every row as read, in id order. */
  async function rowsOf(client: Client, kind: MessageKind, ids: number[]): Promise<Row[]> {
    return Promise.all(ids.map(async (id) => (await client.get(`/v3/${kind.collection}/${id}`)).body));
  }

  async function check(client: Client, url: string, rows: Row[], cases: Case[]) {
    for (const [query, matches] of cases) {
      const expected = rows.filter(matches).map((r) => r.id);
      assert.ok(expected.length > 0 || query.includes('Slybroadcast'), `${query} is a meaningful case`);
      const reply = await client.get(`${url}?${query}&per_page=100`);
      assert.deepEqual(idsOf(reply), expected, `${query}: ${reply.raw.slice(0, 300)}`);
      assert.equal(reply.body.meta.total, expected.length, query);
    }
  }

  async function refusedParameters(client: Client, url: string, filters: string[], bad: string[]) {
    const unknown = await client.get(`${url}?colour=red`);
    assertProblem(unknown, 400, 'validation');
    const listed: string = unknown.body.errors.colour[0];
    for (const filter of [...filters, 'page', 'per_page']) assert.ok(listed.includes(filter), `${filter} is listed: ${listed}`);
    for (const query of bad) {
      const reply = await client.get(`${url}?${query}`);
      assertProblem(reply, 400, 'validation');
      const name = query.split('=')[0] as string;
      assert.ok(
        Object.keys(reply.body.errors).some((k) => k.startsWith(name)),
        `${query} names ${name}: ${reply.raw}`,
      );
    }
  }

  test('voicemail drops', async () => {
    const { owner, client, ids } = await seed(DROPS, (i) => {
      const scheduled = i % 5 === 0;
      return {
        name: i === 17 ? '50% off_house' : i % 3 === 0 ? `Open House ${i}` : `Call back ${i}`,
        description: i % 4 === 0 ? 'Spring LIST' : null,
        status: scheduled ? 'Scheduled' : 'Saved',
        send_type: scheduled || i % 2 ? 'Future' : 'Now',
        ...(scheduled ? { send_at: apiTime(86_400_000 + i * 1000) } : {}),
        callback_number: i % 7 === 0 ? '727-232-9118' : '727-232-9117',
      };
    });
    const mp3 = (await audioMedia(t, owner, 'mp3')).id;
    for (const id of ids.filter((_, i) => i % 6 === 1))
      assert.equal((await client.put(`/v3/voicemail_drops/${id}`, { media_id: mp3 })).status, 200);
    const url = `/v3/users/${owner.id}/voicemail_drops`;
    const rows = await rowsOf(client, DROPS, ids);

    await assertPaging(client, url, ids, 15, VOICEMAIL_DROP);
    await assertPaging(client, url, ids, 7, VOICEMAIL_DROP);
    const defaults = await client.get(url);
    assertShape(defaults.body, pageShape(VOICEMAIL_DROP));
    assert.deepEqual([defaults.body.meta.per_page, defaults.body.data.length, defaults.body.meta.total], [15, 15, 18]);
    assert.deepEqual(defaults.body.data, rows.slice(0, 15), 'search rows are the resource as read');
    await assertPaging(
      client,
      `${url}?status=Scheduled&name=house`,
      rows.filter((r) => r.status === 'Scheduled' || has(r.name, 'house')).map((r) => r.id),
      3,
      VOICEMAIL_DROP,
    );

    await check(client, url, rows, [
      [`id=${ids[1]}&id=${ids[4]}`, (r) => r.id === ids[1] || r.id === ids[4]],
      ['status=Scheduled', (r) => r.status === 'Scheduled'],
      ['status=Scheduled&status=Saved', () => true],
      ['send_type=Now', (r) => r.send_type === 'Now'],
      ['provider=Sandbox', () => true],
      ['provider=Slybroadcast', () => false],
      [`media_id=${mp3}`, (r) => r.media_id === mp3],
      ['callback_number=7272329118', (r) => r.callback_number === '7272329118'],
      ['name=HOUSE', (r) => has(r.name, 'house')],
      ['name=open&name=call', (r) => has(r.name, 'open') || has(r.name, 'call')],
      ['name=%25', (r) => has(r.name, '%')],
      ['name=_', (r) => has(r.name, '_')],
      ['description=spring list', (r) => has(r.description, 'spring list')],
      ['status=Scheduled&name=house', (r) => r.status === 'Scheduled' || has(r.name, 'house')],
      [`name=house&id=${ids[1]}&send_type=Now`, (r) => has(r.name, 'house') || r.id === ids[1] || r.send_type === 'Now'],
    ]);
    await refusedParameters(
      client,
      url,
      ['id', 'provider', 'media_id', 'callback_number', 'name', 'description', 'status', 'send_type'],
      [
        'status=Bogus',
        'provider=sandbox',
        'send_type=later',
        'id=abc',
        'id=0',
        'media_id=1.5',
        'name=',
        'page=0',
        'page=abc',
        'per_page=0',
        'per_page=101',
        'source=API',
        'subject=x',
      ],
    );
  });

  test('templated emails', async () => {
    const owner = await createUser(t, 'User');
    const template = await createTemplate(t);
    const signature = await createSignature(t, owner);
    const { client, ids } = await seed(
      EMAILS,
      (i) => {
        const scheduled = i % 5 === 0;
        return {
          subject: i % 3 === 0 ? `Open House ${i}` : `Check-in ${i}`,
          description: i % 4 === 0 ? 'Spring LIST' : '',
          status: scheduled ? 'Scheduled' : 'Saved',
          send_type: scheduled || i % 2 ? 'Future' : 'Now',
          ...(scheduled ? { send_at: apiTime(86_400_000) } : {}),
          templated_message_id: i % 6 === 0 ? template.id : null,
          signature_id: i % 7 === 0 ? signature.id : null,
        };
      },
      owner,
    );
    await sql`UPDATE templated_emails SET source = 'Web' WHERE id IN (${ids[2]}, ${ids[9]})`.execute(t.database.db);
    const url = `/v3/users/${owner.id}/templated_emails`;
    const rows = await rowsOf(client, EMAILS, ids);

    await assertPaging(client, url, ids, 15, EMAILS.shape);
    await assertPaging(client, url, ids, 7, EMAILS.shape);
    await assertPaging(
      client,
      `${url}?source=Web&subject=house`,
      rows.filter((r) => r.source === 'Web' || has(r.subject, 'house')).map((r) => r.id),
      4,
      EMAILS.shape,
    );
    await check(client, url, rows, [
      [`id=${ids[0]}&id=${ids[17]}`, (r) => r.id === ids[0] || r.id === ids[17]],
      ['status=Scheduled', (r) => r.status === 'Scheduled'],
      ['send_type=Future', (r) => r.send_type === 'Future'],
      ['source=Web', (r) => r.source === 'Web'],
      ['source=API&source=Web', () => true],
      [`templated_message_id=${template.id}`, (r) => r.templated_message_id === template.id],
      [`signature_id=${signature.id}`, (r) => r.signature_id === signature.id],
      ['subject=HOUSE', (r) => has(r.subject, 'house')],
      ['description=spring', (r) => has(r.description, 'spring')],
      ['subject=house&status=Scheduled', (r) => has(r.subject, 'house') || r.status === 'Scheduled'],
      [
        `signature_id=${signature.id}&source=Web&subject=check`,
        (r) => r.signature_id === signature.id || r.source === 'Web' || has(r.subject, 'check'),
      ],
    ]);
    await refusedParameters(
      client,
      url,
      ['id', 'templated_message_id', 'subject', 'description', 'signature_id', 'status', 'send_type', 'source'],
      [
        'source=Phone',
        'status=sent',
        'signature_id=x',
        'templated_message_id=-1',
        'subject=',
        'page=-2',
        'per_page=1000',
        'name=house',
        'provider=Sandbox',
      ],
    );
  });
  test('totals follow every change, however it is made; an unchanged search is counted once', async () => {
    for (const kind of [DROPS, EMAILS]) {
      const owner = await createUser(t, 'User');
      const client = asKey(t.app, owner.key);
      const ids: number[] = [];
      for (let i = 0; i < 6; i++) ids.push((await createMessage(t, kind, owner, { [kind.textField]: `House ${i}` })).id);
      const url = `/v3/users/${owner.id}/${kind.collection}?${kind.textField}=house&status=Scheduled&per_page=2`;
      const total = async () => {
        const reply = await client.get(url);
        assert.equal(reply.status, 200, reply.raw);
        return reply.body.meta.total;
      };
      assert.equal(await total(), 6);
      const before = t.database.queryCount();
      assert.equal(await total(), 6);
      const repeated = t.database.queryCount() - before;
      const again = t.database.queryCount();
      await client.get(`${url}&page=2`);
      assert.equal(t.database.queryCount() - again, repeated, 'page 2 reuses the total too');
      const fresh = t.database.queryCount();
      await client.get(`${url}&description=x`);
      assert.equal(t.database.queryCount() - fresh, repeated, "a new filter is counted in the search's own statement");

      const made = await createMessage(t, kind, owner, { [kind.textField]: 'Another house' });
      assert.equal(await total(), 7, 'create');
      await client.put(`/v3/${kind.collection}/${made.id}`, { [kind.textField]: 'Condo' });
      assert.equal(await total(), 6, 'update');
      await client.put(`/v3/${kind.collection}/${made.id}`, { status: 'Scheduled' });
      assert.equal(await total(), 7, 'scheduled');
      await client.delete(`/v3/${kind.collection}/${ids[0]}`);
      assert.equal(await total(), 6, 'delete');
      // The sending engine (or an operator) changes rows without the API.
      await sql`UPDATE ${sql.table(kind.collection)} SET ${sql.ref(kind.textField)} = 'Villa' WHERE id = ${ids[1]}`.execute(t.database.db);
      assert.equal(await total(), 5, 'a change made in SQL');
      await sql`UPDATE ${sql.table(kind.collection)} SET status = 'Sending' WHERE id = ${made.id}`.execute(t.database.db);
      assert.equal(await total(), 4, 'a status change made in SQL');
      // Another user's changes leave the total (and its validity) alone.
      await createMessage(t, kind, await createUser(t, 'User'), { [kind.textField]: 'House elsewhere' });
      const other = t.database.queryCount();
      assert.equal(await total(), 4);
      assert.equal(t.database.queryCount() - other, repeated, "another owner's change keeps the count");

      // Overlapping filters, some on NULL columns: the total counted in parts (one part cached, the
      // next new) equals the rows a page large enough to hold them all lists.
      const base = `/v3/users/${owner.id}/${kind.collection}`;
      for (const query of [
        `${kind.textField}=house&${kind.textField}=ous&status=Sending`,
        `description=nothing&${kind.textField}=1&status=Saved&status=Scheduled`,
        `description=nothing&${kind.textField}=villa&${kind.textField}=house&status=Scheduled`,
      ]) {
        const all = await client.get(`${base}?${query}&per_page=100`);
        const counted = await client.get(`${base}?${query}&per_page=1`);
        assert.ok(all.body.data.length > 1, `${query} is a meaningful case`);
        assert.equal(counted.body.meta.total, all.body.data.length, query);
      }
    }
  });
});
