import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { createMessage, KINDS } from './fixtures.ts';

/**
 * The access rule (README, "API conventions") on both message resources: User, Team Administrator and Administrator
 * against their own, a teammate's, another team's and nonexistent messages and users.
 */
describe('message access rules', () => {
  let t: TestApp;
  let member: Actor;
  let teammate: Actor;
  let teamAdmin: Actor;
  let outsider: Actor;
  let outsiderAdmin: Actor;
  let admin: Actor;
  before(async () => {
    t = await startTestApp();
    const team = await createTeam(t);
    const otherTeam = await createTeam(t);
    member = await createUser(t, 'User', team);
    teammate = await createUser(t, 'User', team);
    teamAdmin = await createUser(t, 'Team Administrator', team);
    outsider = await createUser(t, 'User', otherTeam);
    outsiderAdmin = await createUser(t, 'Team Administrator', otherTeam);
    admin = { id: t.adminId, teamId: null, key: t.adminKey, email: '' };
  });
  after(() => t.close());

  for (const kind of KINDS) {
    describe(kind.label, () => {
      const collection = (userId: number) => `/v3/users/${userId}/${kind.collection}`;
      const one = (id: number | string) => `/v3/${kind.collection}/${id}`;
      /** Who reaches whose messages: [caller, owner, reaches]. */
      const matrix = (): [string, Actor, Actor, boolean][] => [
        ['User → own', member, member, true],
        ['User → teammate', member, teammate, false],
        ['User → their Team Administrator', member, teamAdmin, false],
        ['User → other team', member, outsider, false],
        ['Team Administrator → own', teamAdmin, teamAdmin, true],
        ['Team Administrator → team member', teamAdmin, member, true],
        ['Team Administrator → other team', teamAdmin, outsider, false],
        ['Team Administrator → Administrator', teamAdmin, admin, false],
        ['other Team Administrator → team member', outsiderAdmin, member, false],
        ['Administrator → own', admin, admin, true],
        ['Administrator → anyone', admin, member, true],
        ['Administrator → other team', admin, outsiderAdmin, true],
      ];

      test('/users/{id}/…: search and create reach a user per the rules; a nonexistent user is 403, 404 for Administrators', async () => {
        for (const [what, caller, owner, reaches] of matrix()) {
          const client = asKey(t.app, caller.key);
          const body = await kind.validBody(t, owner);
          const search = await client.get(collection(owner.id));
          const created = await client.post(collection(owner.id), body);
          if (reaches) {
            assert.equal(search.status, 200, `${what} search: ${search.raw}`);
            assert.equal(created.status, 201, `${what} create: ${created.raw}`);
            assert.ok(
              (await client.get(collection(owner.id))).body.data.some((m: { id: number }) => m.id === created.body.id),
              `${what}: the new message is the owner's`,
            );
          } else {
            assertProblem(search, 403, 'forbidden');
            assertProblem(created, 403, 'forbidden');
          }
        }
        const body = await kind.validBody(t, member);
        for (const caller of [member, teamAdmin, outsiderAdmin]) {
          assertProblem(await asKey(t.app, caller.key).get(collection(987_654_321)), 403, 'forbidden');
          assertProblem(await asKey(t.app, caller.key).post(collection(987_654_321), body), 403, 'forbidden');
        }
        assertProblem(await asKey(t.app, t.adminKey).get(collection(987_654_321)), 404, 'not_found');
        assertProblem(await asKey(t.app, t.adminKey).post(collection(987_654_321), body), 404, 'not_found');
        assertProblem(await asKey(t.app, undefined).get(collection(member.id)), 401, 'unauthorized');
        assertProblem(await asKey(t.app, undefined).post(collection(member.id), body), 401, 'unauthorized');
      });

      test('/<resource>/{id}: read, update and delete reach a message per the rules; missing or deleted is 404', async () => {
        for (const [what, caller, owner, reaches] of matrix()) {
          const client = asKey(t.app, caller.key);
          const message = await createMessage(t, kind, owner);
          const read = await client.get(one(message.id));
          const updated = await client.put(one(message.id), { [kind.textField]: `Edited by ${what}` });
          if (reaches) {
            assert.equal(read.status, 200, `${what} read`);
            assert.deepEqual(read.body, message);
            assert.equal(updated.status, 200, `${what} update: ${updated.raw}`);
            assert.equal(updated.body[kind.textField], `Edited by ${what}`);
            assert.deepEqual((await client.delete(one(message.id))).body, { success: true }, `${what} delete`);
            for (const again of [client.get(one(message.id)), client.put(one(message.id), {}), client.delete(one(message.id))]) {
              assertProblem(await again, 404, 'not_found');
            }
          } else {
            assertProblem(read, 403, 'forbidden');
            assertProblem(updated, 403, 'forbidden');
            assertProblem(await client.delete(one(message.id)), 403, 'forbidden');
            const still = await asKey(t.app, t.adminKey).get(one(message.id));
            assert.deepEqual(still.body, message, `${what}: untouched`);
          }
        }
        for (const caller of [member, teamAdmin, admin]) {
          const client = asKey(t.app, caller.key);
          assertProblem(await client.get(one(987_654_321)), 404, 'not_found');
          assertProblem(await client.put(one(987_654_321), { [kind.textField]: 'x' }), 404, 'not_found');
          assertProblem(await client.delete(one(987_654_321)), 404, 'not_found');
        }
        // Another team's deleted message: 404 (it does not exist any more), not 403.
        const gone = await createMessage(t, kind, outsider);
        assert.equal((await asKey(t.app, outsider.key).delete(one(gone.id))).status, 200);
        assertProblem(await asKey(t.app, member.key).get(one(gone.id)), 404, 'not_found');
        assertProblem(await asKey(t.app, undefined).get(one(gone.id)), 401, 'unauthorized');
      });

      test("a Team Administrator's message for a member uses the member's data", async () => {
        const own = await kind.validBody(t, teamAdmin);
        const reply = await asKey(t.app, teamAdmin.key).post(collection(member.id), own);
        if (kind.collection === 'voicemail_drops') {
          assertProblem(reply, 400, 'validation');
          assert.deepEqual(Object.keys(reply.body.errors), ['media_id'], "the Team Administrator's media is not the member's");
        } else {
          assert.equal(reply.status, 201, reply.raw);
        }
      });

      test('a cancelled account in its grace period reads and deletes but does not write', async () => {
        const leaving = await createUser(t, 'User');
        const message = await createMessage(t, kind, leaving);
        const client = asKey(t.app, leaving.key);
        assert.equal((await client.post(`/v3/users/${leaving.id}/cancel`)).status, 200);
        assertProblem(await client.post(collection(leaving.id), await kind.validBody(t, leaving)), 403, 'account_cancelled');
        assertProblem(await client.put(one(message.id), { [kind.textField]: 'x' }), 403, 'account_cancelled');
        assert.equal((await client.get(collection(leaving.id))).status, 200);
        assert.equal((await client.get(one(message.id))).status, 200);
        assert.equal((await client.delete(one(message.id))).status, 200);
      });
    });
  }
});
