import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** The three owned resources of docs/contacts.md, each with a valid create and update body. */
const RESOURCES = [
  {
    path: 'contacts',
    create: () => ({ email: `a-${randomBytes(3).toString('hex')}@example.com`, tags: ['Sphere'] }),
    update: { first_name: 'Changed' },
  },
  { path: 'tags', create: () => ({ name: `Tag ${randomBytes(3).toString('hex')}` }), update: { name: `Renamed ${Date.now()}` } },
  { path: 'signatures', create: () => ({ name: 'Sig', body: '<p>Jane</p>' }), update: { name: 'Changed' } },
] as const;

describe('access to contacts, tags and signatures', () => {
  let t: TestApp;
  let owner: Actor;
  let teamAdmin: Actor;
  let stranger: Actor;
  let strangerAdmin: Actor;
  const as = (actor: Actor | 'admin') => asKey(t.app, actor === 'admin' ? t.adminKey : actor.key);

  before(async () => {
    t = await startTestApp();
    const teamA = await createTeam(t);
    const teamB = await createTeam(t);
    owner = await createUser(t, 'User', teamA);
    teamAdmin = await createUser(t, 'Team Administrator', teamA);
    stranger = await createUser(t, 'User', teamB);
    strangerAdmin = await createUser(t, 'Team Administrator', teamB);
  });
  after(() => t.close());

  for (const resource of RESOURCES) {
    const collection = (userId: number) => `/v3/users/${userId}/${resource.path}`;
    const item = (id: number) => `/v3/${resource.path}/${id}`;

    test(`${resource.path}: the collection of a user`, async () => {
      const own = await as(owner).post(collection(owner.id), resource.create());
      assert.equal(own.status, 201, own.raw);
      const forTeammate = await as(teamAdmin).post(collection(owner.id), resource.create());
      assert.equal(forTeammate.status, 201, 'a Team Administrator creates for a teammate');
      if (resource.path === 'contacts') assert.equal(forTeammate.body.user_id, owner.id);
      const listed = await as(owner).get(collection(owner.id));
      assert.ok(
        listed.body.data.some((row: { id: number }) => row.id === forTeammate.body.id),
        "it is the teammate's row",
      );
      for (const actor of [owner, teamAdmin, 'admin'] as const) assert.equal((await as(actor).get(collection(owner.id))).status, 200);
      for (const actor of [stranger, strangerAdmin]) {
        assertProblem(await as(actor).get(collection(owner.id)), 403, 'forbidden');
        assertProblem(await as(actor).post(collection(owner.id), resource.create()), 403, 'forbidden');
      }
      // A User does not reach a teammate, least of all their Team Administrator.
      assertProblem(await as(owner).get(collection(teamAdmin.id)), 403, 'forbidden');
      // Nobody learns which user ids exist, except Administrators.
      assertProblem(await as(owner).get(collection(987_654_321)), 403, 'forbidden');
      assertProblem(await as(owner).post(collection(987_654_321), resource.create()), 403, 'forbidden');
      assertProblem(await as('admin').get(collection(987_654_321)), 404, 'not_found');
      assertProblem(await as('admin').post(collection(987_654_321), resource.create()), 404, 'not_found');
    });

    test(`${resource.path}: one row by id`, async () => {
      const { id } = (await as(owner).post(collection(owner.id), resource.create())).body;
      for (const actor of [owner, teamAdmin, 'admin'] as const) assert.equal((await as(actor).get(item(id))).status, 200);
      for (const actor of [stranger, strangerAdmin]) {
        assertProblem(await as(actor).get(item(id)), 403, 'forbidden');
        assertProblem(await as(actor).put(item(id), resource.update), 403, 'forbidden');
        assertProblem(await as(actor).delete(item(id)), 403, 'forbidden');
      }
      const byTeamAdmin = await as(teamAdmin).put(item(id), resource.update);
      assert.equal(byTeamAdmin.status, 200, byTeamAdmin.raw);
      const adminsOwn = (await as(teamAdmin).post(collection(teamAdmin.id), resource.create())).body.id;
      assertProblem(await as(owner).get(item(adminsOwn)), 403, 'forbidden');
      assertProblem(await as(owner).delete(item(adminsOwn)), 403, 'forbidden');

      for (const actor of [owner, 'admin'] as const) {
        assertProblem(await as(actor).get(item(987_654_321)), 404, 'not_found');
        assertProblem(await as(actor).put(item(987_654_321), resource.update), 404, 'not_found');
        assertProblem(await as(actor).delete(item(987_654_321)), 404, 'not_found');
      }

      assert.equal((await as(teamAdmin).delete(item(id))).status, 200, 'a Team Administrator deletes for a teammate');
      // Gone is gone for everyone: 404 before any access question.
      for (const actor of [owner, teamAdmin, stranger, 'admin'] as const) {
        assertProblem(await as(actor).get(item(id)), 404, 'not_found');
        assertProblem(await as(actor).put(item(id), resource.update), 404, 'not_found');
        assertProblem(await as(actor).delete(item(id)), 404, 'not_found');
      }
    });
  }

  test('every route is in the OpenAPI document with its error responses', async () => {
    const doc = (await asKey(t.app, undefined).get('/v3/openapi.json')).body;
    for (const path of ['contacts', 'tags', 'signatures']) {
      assert.deepEqual(Object.keys(doc.paths[`/v3/users/{user_id}/${path}`]).sort(), ['get', 'post']);
      assert.deepEqual(Object.keys(doc.paths[`/v3/${path}/{id}`]).sort(), ['delete', 'get', 'put']);
      assert.ok(doc.paths[`/v3/${path}/{id}`].put.responses['403'], `${path}: 403 documented`);
    }
    assert.deepEqual(Object.keys(doc.paths['/v3/templated_messages']).sort(), ['get', 'post']);
    assert.deepEqual(Object.keys(doc.paths['/v3/templated_messages/{id}']).sort(), ['delete', 'get', 'put']);
  });

  test('a cancelled account in its grace period reads and deletes, but writes nothing', async () => {
    const leaving = await createUser(t, 'User', null);
    const client = asKey(t.app, leaving.key);
    const contact = (await client.post(collectionOf(leaving.id), { email: 'keep@example.com' })).body;
    assert.equal((await client.post(`/v3/users/${leaving.id}/cancel`)).status, 200);
    assertProblem(await client.post(collectionOf(leaving.id), { email: 'new@example.com' }), 403, 'account_cancelled');
    assertProblem(await client.put(`/v3/contacts/${contact.id}`, { first_name: 'x' }), 403, 'account_cancelled');
    assert.equal((await client.get(`/v3/contacts/${contact.id}`)).status, 200);
    assert.equal((await client.get(collectionOf(leaving.id))).status, 200);
    assert.equal((await client.delete(`/v3/contacts/${contact.id}`)).status, 200);
  });
});

function collectionOf(userId: number): string {
  return `/v3/users/${userId}/contacts`;
}
