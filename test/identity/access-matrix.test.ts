import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * The access rule (README, "API conventions"): User / Team Administrator / Administrator × own / teammate / other team /
 * nonexistent, on every user and API-key endpoint. `/users/{id}/…` answers 403 for ids the caller
 * may not reach, nonexistent ones included, except to Administrators (404); `/api_keys/{id}`
 * answers 404 for what does not exist and 403 for what exists out of reach.
 */
describe('access matrix', () => {
  let t: TestApp;
  const NONEXISTENT = 987_654;
  let user: Actor;
  let teammate: Actor;
  let teamAdmin: Actor;
  let otherTeam: Actor;
  let admin: Actor;
  const keyIdOf = new Map<number, number>();

  before(async () => {
    t = await startTestApp();
    const team1 = await createTeam(t, 'One');
    const team2 = await createTeam(t, 'Two');
    user = await createUser(t, 'User', team1);
    teammate = await createUser(t, 'User', team1);
    teamAdmin = await createUser(t, 'Team Administrator', team1);
    otherTeam = await createUser(t, 'User', team2);
    admin = await createUser(t, 'Administrator');
    for (const actor of [user, teammate, teamAdmin, otherTeam, admin]) {
      const keys = await asKey(t.app, t.adminKey).get(`/v3/users/${actor.id}/api_keys`);
      keyIdOf.set(actor.id, keys.body.data[0].id);
    }
  });
  after(() => t.close());

  type Target = 'own' | 'teammate' | 'other team' | 'nonexistent';
  const cases: { role: string; caller: () => Actor; targets: Record<Target, () => number>; expect: Record<Target, number> }[] = [
    {
      role: 'User',
      caller: () => user,
      targets: { own: () => user.id, teammate: () => teammate.id, 'other team': () => otherTeam.id, nonexistent: () => NONEXISTENT },
      expect: { own: 200, teammate: 403, 'other team': 403, nonexistent: 403 },
    },
    {
      role: 'Team Administrator',
      caller: () => teamAdmin,
      targets: { own: () => teamAdmin.id, teammate: () => user.id, 'other team': () => otherTeam.id, nonexistent: () => NONEXISTENT },
      expect: { own: 200, teammate: 200, 'other team': 403, nonexistent: 403 },
    },
    {
      role: 'Administrator',
      caller: () => admin,
      targets: { own: () => admin.id, teammate: () => user.id, 'other team': () => otherTeam.id, nonexistent: () => NONEXISTENT },
      expect: { own: 200, teammate: 200, 'other team': 200, nonexistent: 404 },
    },
  ];

  for (const { role, caller, targets, expect } of cases) {
    for (const target of Object.keys(targets) as Target[]) {
      const status = expect[target];
      test(`${role} → ${target}: user endpoints answer ${status}`, async () => {
        const client = asKey(t.app, caller().key);
        const id = targets[target]();
        const replies = {
          'GET /users/{id}': await client.get(`/v3/users/${id}`),
          'PUT /users/{id}': await client.put(`/v3/users/${id}`, { last_name: 'Renamed' }),
          'GET /users/{id}/api_keys': await client.get(`/v3/users/${id}/api_keys`),
          'POST /users/{id}/api_keys': await client.post(`/v3/users/${id}/api_keys`, { name: `by ${role}` }),
        };
        // Minting a key for someone else is for Administrators only (docs/decisions.md).
        const mintable = role === 'Administrator' || target === 'own';
        for (const [endpoint, reply] of Object.entries(replies)) {
          const expected = endpoint.startsWith('POST') && status === 200 ? (mintable ? 201 : 403) : status;
          assert.equal(reply.status, expected, `${endpoint}: ${reply.raw}`);
          if (expected >= 400) assert.match(String(reply.headers['content-type']), /problem\+json/);
        }
      });

      test(`${role} → ${target}: API-key endpoints`, async () => {
        const client = asKey(t.app, caller().key);
        const owner = targets[target]();
        // A fresh key of the target, so revoking it does not disturb other cases.
        let keyId = NONEXISTENT;
        if (target !== 'nonexistent') {
          const made = await asKey(t.app, t.adminKey).post(`/v3/users/${owner}/api_keys`, { name: 'victim' });
          keyId = made.body.id;
        }
        const expected = target === 'nonexistent' ? 404 : status;
        assert.equal((await client.get(`/v3/api_keys/${keyId}`)).status, expected);
        assert.equal((await client.delete(`/v3/api_keys/${keyId}`)).status, expected);
        if (expected === 200) assert.equal((await client.get(`/v3/api_keys/${keyId}`)).status, 404, 'revoked keys are gone');
      });
    }
  }

  test('a Team Administrator cannot reach a teammate with a higher role, nor mint them a key', async () => {
    const team = await createTeam(t, 'Mixed');
    const lead = await createUser(t, 'Team Administrator', team);
    const boss = await createUser(t, 'Administrator', team);
    const client = asKey(t.app, lead.key);
    assert.equal((await client.get(`/v3/users/${boss.id}`)).status, 403);
    assert.equal((await client.post(`/v3/users/${boss.id}/api_keys`, { name: 'escalate' })).status, 403);
    const list = await client.get('/v3/users?per_page=100');
    assert.ok(!list.body.data.some((u: { id: number }) => u.id === boss.id));
  });

  test('GET /users lists exactly the users the caller may reach', async () => {
    const ids = async (actor: Actor) =>
      (await asKey(t.app, actor.key).get('/v3/users?per_page=100')).body.data.map((u: { id: number }) => u.id).sort();
    assert.deepEqual(await ids(user), [user.id]);
    assert.deepEqual(await ids(teamAdmin), [user.id, teammate.id, teamAdmin.id].sort());
    assert.ok((await ids(admin)).includes(otherTeam.id));
  });

  test('creating users: Users may not, Team Administrators only in their team and up to their role', async () => {
    const body = (extra: object) => ({ first_name: 'New', last_name: 'Person', email: `n${Math.random()}@example.com`, ...extra });
    assert.equal((await asKey(t.app, user.key).post('/v3/users', body({}))).status, 403);
    const lead = asKey(t.app, teamAdmin.key);
    const inTeam = await lead.post('/v3/users', body({}));
    assert.equal(inTeam.status, 201, inTeam.raw);
    assert.equal(inTeam.body.team_id, teamAdmin.teamId, 'defaults to the creator’s team');
    assert.equal((await lead.post('/v3/users', body({ team_id: otherTeam.teamId }))).status, 403);
    assert.equal((await lead.post('/v3/users', body({ roles: ['Administrator'] }))).status, 403);
    assert.equal((await lead.post('/v3/users', body({ roles: ['Team Administrator'] }))).status, 201);
  });

  test('role and team changes: nobody raises themself; only Administrators move users between teams', async () => {
    assert.equal((await asKey(t.app, user.key).put(`/v3/users/${user.id}`, { roles: ['Team Administrator'] })).status, 403);
    assert.equal((await asKey(t.app, user.key).put(`/v3/users/${user.id}`, { roles: ['User'] })).status, 200, 'unchanged roles are fine');
    assert.equal((await asKey(t.app, teamAdmin.key).put(`/v3/users/${teamAdmin.id}`, { roles: ['Administrator'] })).status, 403);
    assert.equal((await asKey(t.app, teamAdmin.key).put(`/v3/users/${user.id}`, { team_id: otherTeam.teamId })).status, 403);
    const moved = await asKey(t.app, admin.key).put(`/v3/users/${teammate.id}`, { team_id: otherTeam.teamId });
    assert.equal(moved.status, 200);
    assert.equal(moved.body.team_id, otherTeam.teamId);
    await asKey(t.app, admin.key).put(`/v3/users/${teammate.id}`, { team_id: user.teamId });
  });

  test('cancelling: the user themself or an Administrator, not a Team Administrator', async () => {
    const team = await createTeam(t, 'Cancel');
    const lead = await createUser(t, 'Team Administrator', team);
    const member = await createUser(t, 'User', team);
    const other = await createUser(t, 'User', team);
    assert.equal((await asKey(t.app, lead.key).post(`/v3/users/${member.id}/cancel`)).status, 403);
    assert.equal((await asKey(t.app, user.key).post(`/v3/users/${member.id}/cancel`)).status, 403);
    const self = await asKey(t.app, member.key).post(`/v3/users/${member.id}/cancel`);
    assert.equal(self.status, 200);
    assert.equal(self.body.status, 'Cancelled');
    const byAdmin = await asKey(t.app, admin.key).post(`/v3/users/${other.id}/cancel`);
    assert.equal(byAdmin.status, 200);
    assert.equal(byAdmin.body.status, 'Cancelled');
  });

  test('teams: Administrators create and list all; others see only their own team', async () => {
    assert.equal((await asKey(t.app, teamAdmin.key).post('/v3/teams', { name: 'Nope' })).status, 403);
    assert.equal((await asKey(t.app, user.key).get(`/v3/teams/${user.teamId}`)).status, 200);
    assert.equal((await asKey(t.app, user.key).get(`/v3/teams/${otherTeam.teamId}`)).status, 403);
    assert.equal((await asKey(t.app, user.key).get(`/v3/teams/${NONEXISTENT}`)).status, 404);
    const mine = await asKey(t.app, user.key).get('/v3/teams');
    assert.deepEqual(
      mine.body.data.map((team: { id: number }) => team.id),
      [user.teamId],
    );
    assert.ok((await asKey(t.app, admin.key).get('/v3/teams')).body.meta.total >= 2);
  });
});
