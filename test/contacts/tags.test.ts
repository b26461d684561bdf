import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { assertPaging, idsOf } from '../support/paging.ts';
import { assertShape } from '../support/shapes.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { createContact, TAG } from './fixtures.ts';

describe('tags', () => {
  let t: TestApp;
  let owner: Actor;
  let client: ReturnType<typeof asKey>;
  before(async () => {
    t = await startTestApp();
    owner = await createUser(t, 'User', await createTeam(t));
    client = asKey(t.app, owner.key);
  });
  after(() => t.close());

  /** The owner's tags as `name → contacts_count`. */
  async function counts(userId = owner.id, as = client): Promise<Record<string, number>> {
    const page = await as.get(`/v3/users/${userId}/tags?per_page=100`);
    assert.equal(page.status, 200, page.raw);
    return Object.fromEntries(page.body.data.map((tag: { name: string; contacts_count: number }) => [tag.name, tag.contacts_count]));
  }

  test('create → read → rename → delete → 404', async () => {
    const created = await client.post(`/v3/users/${owner.id}/tags`, { name: '  Open house  ', contacts_count: 99, id: 5 });
    assert.equal(created.status, 201, created.raw);
    assertShape(created.body, TAG);
    const { id } = created.body;
    assert.equal(created.headers.location, `https://hopper.test/v3/tags/${id}`);
    assert.equal(created.body.name, 'Open house');
    assert.equal(created.body.contacts_count, 0);
    assert.deepEqual((await client.get(`/v3/tags/${id}`)).body, created.body);

    const renamed = await client.put(`/v3/tags/${id}`, { ...created.body, name: 'Open House 2026' });
    assert.equal(renamed.status, 200, renamed.raw);
    assertShape(renamed.body, TAG);
    assert.equal(renamed.body.name, 'Open House 2026');
    assert.equal(renamed.body.created_at, created.body.created_at);
    assert.deepEqual((await client.get(`/v3/tags/${id}`)).body, renamed.body);
    const unchanged = await client.put(`/v3/tags/${id}`, {});
    assert.equal(unchanged.status, 200);
    assert.equal(unchanged.body.name, 'Open House 2026');

    assert.deepEqual((await client.delete(`/v3/tags/${id}`)).body, { success: true });
    assertProblem(await client.get(`/v3/tags/${id}`), 404, 'not_found');
    assertProblem(await client.put(`/v3/tags/${id}`, { name: 'x' }), 404, 'not_found');
    assertProblem(await client.delete(`/v3/tags/${id}`), 404, 'not_found');
  });

  test('names are unique per owner, ignoring case', async () => {
    const first = await client.post(`/v3/users/${owner.id}/tags`, { name: 'Investors' });
    assert.equal(first.status, 201);
    const again = await client.post(`/v3/users/${owner.id}/tags`, { name: 'INVESTORS ' });
    assertProblem(again, 409, 'conflict');
    assert.equal(again.body.detail, 'There is already a tag named INVESTORS.');
    assert.deepEqual(again.body.errors, { name: ['is already the name of another tag'] });
    const other = await client.post(`/v3/users/${owner.id}/tags`, { name: 'Renters' });
    assertProblem(await client.put(`/v3/tags/${other.body.id}`, { name: 'investors' }), 409, 'conflict');
    const recased = await client.put(`/v3/tags/${first.body.id}`, { name: 'investors' });
    assert.equal(recased.status, 200, 'a tag may change the case of its own name');
    const stranger = await createUser(t, 'User', await createTeam(t));
    assert.equal((await asKey(t.app, stranger.key).post(`/v3/users/${stranger.id}/tags`, { name: 'Investors' })).status, 201);
  });

  test('validation names the field; bad input is never a 500', async () => {
    const url = `/v3/users/${owner.id}/tags`;
    for (const body of [{}, { name: '' }, { name: '   ' }, { name: 'x'.repeat(256) }, { name: 5 }, { name: null }, { name: ['a'] }]) {
      const reply = await client.post(url, body);
      assertProblem(reply, 400, 'validation');
      assert.deepEqual(Object.keys(reply.body.errors), ['name'], JSON.stringify(body));
    }
    const unknown = await client.post(url, { name: 'ok', color: 'red' });
    assert.deepEqual(unknown.body.errors, { color: ['is not a known field'] });
    for (const id of ['abc', '0', '1.5', '99999999999999999999']) {
      assertProblem(await client.get(`/v3/tags/${id}`), 400, 'validation');
      assertProblem(await client.delete(`/v3/tags/${id}`), 400, 'validation');
    }
    const hostile = await client.post(url, { name: "x'); DROP TABLE tags; -- <img src=x onerror=alert(1)>" });
    assert.equal(hostile.status, 201);
    assert.equal(hostile.body.name, "x'); DROP TABLE tags; -- <img src=x onerror=alert(1)>");
  });

  test('contacts create the tags they name, once per owner whatever the case, and counts follow', async () => {
    const user = await createUser(t, 'User', await createTeam(t));
    const as = asKey(t.app, user.key);
    const a = await createContact(as, user.id, { tags: ['Sphere', 'Buyers'] });
    assert.deepEqual(a.tags, ['Buyers', 'Sphere']);
    assert.deepEqual(await counts(user.id, as), { Sphere: 1, Buyers: 1 });

    const b = await createContact(as, user.id, { tags: ['sphere', 'SPHERE', '  New  '] });
    assert.deepEqual(b.tags, ['New', 'Sphere'], 'the existing tag keeps its case; duplicates collapse');
    const c = await createContact(as, user.id, { tags: ['New'] });
    assert.deepEqual(await counts(user.id, as), { Sphere: 2, Buyers: 1, New: 2 });

    const tags = (await as.get(`/v3/users/${user.id}/tags?name=sphere`)).body.data;
    assert.equal(tags.length, 1);
    const sphere = await as.get(`/v3/tags/${tags[0].id}`);
    assert.equal(sphere.body.contacts_count, 2);

    // Deleted contacts are not counted; a tag nobody carries stays.
    await as.delete(`/v3/contacts/${a.id}`);
    assert.deepEqual(await counts(user.id, as), { Sphere: 1, Buyers: 0, New: 2 });
    // Updating a contact's tags replaces them.
    const moved = await as.put(`/v3/contacts/${b.id}`, { tags: ['Buyers'] });
    assert.deepEqual(moved.body.tags, ['Buyers']);
    assert.deepEqual(await counts(user.id, as), { Sphere: 0, Buyers: 1, New: 1 });
    assert.deepEqual((await as.put(`/v3/contacts/${c.id}`, { first_name: 'Kept' })).body.tags, ['New'], 'no tags field: tags unchanged');

    // Another owner's same names are their own tags.
    assert.equal((await counts()).Sphere, undefined);
  });

  test('deleting a tag takes it off every contact', async () => {
    const tagged = await createContact(client, owner.id, { tags: ['Doomed', 'Kept'] });
    const doomed = (await client.get(`/v3/users/${owner.id}/tags?name=doomed`)).body.data[0];
    assert.equal(doomed.contacts_count, 1);
    assert.equal((await client.delete(`/v3/tags/${doomed.id}`)).status, 200);
    assert.deepEqual((await client.get(`/v3/contacts/${tagged.id}`)).body.tags, ['Kept']);
    // Naming it again creates a new tag.
    const again = await client.put(`/v3/contacts/${tagged.id}`, { tags: ['Kept', 'Doomed'] });
    assert.deepEqual(again.body.tags, ['Doomed', 'Kept']);
    const reborn = (await client.get(`/v3/users/${owner.id}/tags?name=doomed`)).body.data[0];
    assert.notEqual(reborn.id, doomed.id);
    assert.equal(reborn.contacts_count, 1);
  });

  test('search: paging, filters OR-ed, bad parameters', async () => {
    const user = await createUser(t, 'User', await createTeam(t));
    const as = asKey(t.app, user.key);
    const url = `/v3/users/${user.id}/tags`;
    const made: { id: number; name: string }[] = [];
    for (let i = 0; i < 18; i++) {
      const reply = await as.post(url, { name: `${i % 3 === 0 ? 'Lead' : 'Client'} ${String(i).padStart(2, '0')}` });
      made.push(reply.body);
    }
    const all = made.map((tag) => tag.id);
    await assertPaging(as, url, all, 8, TAG);
    assert.deepEqual(idsOf(await as.get(url)), all.slice(0, 15));
    assert.deepEqual(
      idsOf(await as.get(`${url}?name=LEAD`)),
      made.filter((x) => x.name.startsWith('Lead')).map((x) => x.id),
    );
    assert.deepEqual(idsOf(await as.get(`${url}?id=${all[4]}&id=${all[2]}`)), [all[2], all[4]]);
    const either = made.filter((x) => x.name.startsWith('Lead') || x.id === all[1]).map((x) => x.id);
    assert.deepEqual(idsOf(await as.get(`${url}?name=lead&id=${all[1]}`)), either);
    await assertPaging(
      as,
      `${url}?name=client`,
      made.filter((x) => x.name.startsWith('Client')).map((x) => x.id),
      5,
      TAG,
    );
    await as.delete(`/v3/tags/${all[0]}`);
    assert.ok(!idsOf(await as.get(`${url}?per_page=100`)).includes(all[0] as number));
    for (const query of ['contacts_count=0', 'user_id=1', 'id=x', 'name=', 'per_page=1000', 'page=0']) {
      assertProblem(await as.get(`${url}?${query}`), 400, 'validation');
    }
  });
});
