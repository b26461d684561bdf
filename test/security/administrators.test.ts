import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * Finding: the last-Administrator guard counted any active Administrator, even one with no
 * password and no key: create one, and the real one could demote itself, leaving nobody able to
 * administer until a restart with BOOTSTRAP_ADMIN_KEY.
 */
describe('an Administrator that can administer always remains', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('an empty Administrator (no password, no key) does not count', async () => {
    const admin = asKey(t.app, t.adminKey);
    const empty = await admin.post('/v3/users', {
      first_name: 'Empty',
      last_name: 'Admin',
      email: 'empty-admin@example.com',
      roles: ['Administrator'],
    });
    assert.equal(empty.status, 201);
    const demote = await admin.put(`/v3/users/${t.adminId}`, { roles: ['User'] });
    assertProblem(demote, 400, 'bad_request');
    assert.match(demote.body.detail, /last active Administrator who can sign in or hold a key/);
    assertProblem(await admin.post(`/v3/users/${t.adminId}/cancel`), 400, 'bad_request');
    // Nor can the last able one revoke its own last key while it has no password… (the first
    // Administrator has a password, so this one is made for the purpose).
    const keyed = await createUser(t, 'Administrator');
    const keyedApi = asKey(t.app, keyed.key);
    // …while another able Administrator exists, it may:
    const ownKeys = await keyedApi.get(`/v3/users/${keyed.id}/api_keys`);
    assert.equal(ownKeys.status, 200);
    // The first Administrator, demoted now that `keyed` can act, leaves `keyed` the last able one.
    assert.equal((await admin.put(`/v3/users/${t.adminId}`, { roles: ['User'] })).status, 200);
    const last = await keyedApi.delete(`/v3/api_keys/${ownKeys.body.data[0].id}`);
    assertProblem(last, 400, 'bad_request');
    assert.match(last.body.detail, /cannot be left without a key/);
    assert.equal((await keyedApi.get('/v3/users')).status, 200, 'the key still works');
  });
});
