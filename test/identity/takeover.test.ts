import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { generateApiKey } from '../../src/api-key-format.ts';
import { bootstrapAdministrator } from '../../src/identity/bootstrap.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { assertProblem, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** No takeover inside a team, no lock-out of the whole service. */
describe('no takeover', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('a Team Administrator cannot set a teammate’s password or email, even a User’s', async () => {
    const team = await createTeam(t);
    const lead = await createUser(t, 'Team Administrator', team);
    const member = await createUser(t, 'User', team);
    const client = asKey(t.app, lead.key);
    assertProblem(await client.put(`/v3/users/${member.id}`, { password: 'a-new-password-123' }), 403, 'forbidden');
    assertProblem(await client.put(`/v3/users/${member.id}`, { email: 'taken-over@example.com' }), 403, 'forbidden');
    // Other fields of a lower-ranked teammate stay theirs to manage.
    assert.equal((await client.put(`/v3/users/${member.id}`, { first_name: 'Renamed' })).status, 200);
    // Themself, and an Administrator, may.
    assert.equal((await asKey(t.app, member.key).put(`/v3/users/${member.id}`, { password: 'my-own-password-123' })).status, 200);
    assert.equal((await asKey(t.app, t.adminKey).put(`/v3/users/${member.id}`, { email: `m-${member.id}@example.com` })).status, 200);
  });

  test('a Team Administrator cannot mint or revoke a peer Team Administrator’s keys, nor demote them', async () => {
    const team = await createTeam(t);
    const lead = await createUser(t, 'Team Administrator', team);
    const peer = await createUser(t, 'Team Administrator', team);
    const member = await createUser(t, 'User', team);
    const client = asKey(t.app, lead.key);
    assertProblem(await client.post(`/v3/users/${peer.id}/api_keys`, { name: 'mine now' }), 403, 'forbidden');
    assertProblem(await client.put(`/v3/users/${peer.id}`, { roles: ['User'] }), 403, 'forbidden');
    const peerKeys = await asKey(t.app, peer.key).get(`/v3/users/${peer.id}/api_keys`);
    assertProblem(await client.delete(`/v3/api_keys/${peerKeys.body.data[0].id}`), 403, 'forbidden');
    // Reading a peer stays allowed (the access rule); a User of the team is managed, but gets no key from them.
    assert.equal((await client.get(`/v3/users/${peer.id}`)).status, 200);
    assertProblem(await client.post(`/v3/users/${member.id}/api_keys`, { name: 'for the member' }), 403, 'forbidden');
  });
});

describe('no lock-out', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('the last active Administrator cannot be cancelled or demoted (400 saying why); with a second one, it can', async () => {
    const admin = asKey(t.app, t.adminKey);
    const demote = await admin.put(`/v3/users/${t.adminId}`, { roles: ['User'] });
    assertProblem(demote, 400, 'bad_request');
    assert.match(demote.body.detail, /last active Administrator/);
    const cancel = await admin.post(`/v3/users/${t.adminId}/cancel`);
    assertProblem(cancel, 400, 'bad_request');
    assert.match(cancel.body.detail, /last active Administrator/);

    const second = await createUser(t, 'Administrator');
    assert.equal((await admin.put(`/v3/users/${second.id}`, { roles: ['User'] })).status, 200, 'demoting one of two');
    assertProblem(await admin.post(`/v3/users/${t.adminId}/cancel`), 400, 'bad_request');
  });

  test('BOOTSTRAP_ADMIN_KEY at start restores an active Administrator holding it, whatever the database holds', async () => {
    const key = generateApiKey();
    const withKey = { ...t.config, bootstrapAdminKey: key };
    const first = await bootstrapAdministrator(t.database.db, withKey);
    assert.equal(first.kind, 'configured-key');
    const holder = first.kind === 'configured-key' ? first.userId : 0;
    assert.equal((await asKey(t.app, key).get('/v3/users')).status, 200);

    // Whatever happens to the holder and the key in the database: revoked, demoted, cancelled, deleted.
    await sql`UPDATE api_keys SET revoked_at = now() WHERE user_id = ${holder}`.execute(t.database.db);
    await sql`UPDATE users SET roles = '{User}', status = 'Cancelled', cancelled_at = now(), deleted_at = now() WHERE id = ${holder}`.execute(
      t.database.db,
    );
    // Written outside the API: noticed when its NOTIFY arrives (on a loaded machine, maybe after the next request).
    await waitFor('the revoked key to be refused', async () => (await asKey(t.app, key).get('/v3/users')).status === 401, {
      timeoutMs: 5_000,
    });
    assertProblem(await asKey(t.app, key).get('/v3/users'), 401);
    const again = await bootstrapAdministrator(t.database.db, withKey);
    assert.deepEqual(again, { kind: 'configured-key', userId: holder });
    const users = await asKey(t.app, key).get(`/v3/users/${holder}`);
    assert.equal(users.status, 200);
    assert.equal(users.body.status, 'Active');
    assert.ok(users.body.roles.includes('Administrator'));

    // A new key while no active Administrator exists and admin@localhost is taken: a new Administrator.
    await sql`UPDATE users SET status = 'Cancelled', cancelled_at = now() WHERE 'Administrator' = ANY (roles)`.execute(t.database.db);
    const other = generateApiKey();
    const fresh = await bootstrapAdministrator(t.database.db, { ...t.config, bootstrapAdminKey: other });
    assert.equal(fresh.kind, 'configured-key');
    const me = await asKey(t.app, other).get('/v3/users?status=Active');
    assert.equal(me.status, 200);
    assert.ok(me.body.data.some((u: { roles: string[] }) => u.roles.includes('Administrator')));
  });
});

describe('validation quirks', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('a time_zone of "" is refused', async () => {
    const admin = asKey(t.app, t.adminKey);
    assertProblem(await admin.put(`/v3/users/${t.adminId}`, { time_zone: '' }), 400, 'validation');
    assertProblem(
      await admin.post('/v3/users', { first_name: 'A', last_name: 'B', email: 'tz@example.com', time_zone: '' }),
      400,
      'validation',
    );
    assert.equal((await admin.put(`/v3/users/${t.adminId}`, { time_zone: null })).status, 200);
  });
});
