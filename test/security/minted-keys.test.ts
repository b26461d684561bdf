import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ROLE_NAMES, type RoleName } from '../../src/identity/roles.ts';
import { asKey } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { browser } from '../web/web-client.ts';

/**
 * Finding: a Team Administrator, refused a teammate's password and email, minted the teammate a
 * key and with it set both, signed in as them, locked them out and cancelled the account. The
 * invariant tested for every pair of roles, in the same team and across teams: whatever a key
 * minted by M for V can do to V's account, M could do directly — so a minted key is never a way
 * around the access rule.
 */
type Step = 'password' | 'email' | 'sign in' | 'mint another' | 'cancel';
const STEPS: Step[] = ['password', 'email', 'sign in', 'mint another', 'cancel'];

describe('a key acts for its user only as far as its minter could', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  /** A user with a password, in `team`. */
  async function victim(role: RoleName, team: number | null): Promise<Actor & { password: string }> {
    const password = `pw-${randomBytes(8).toString('hex')}`;
    const actor = await createUser(t, role, team, { password });
    return { ...actor, password };
  }

  /** Runs the takeover chain with `key` against `target`; the statuses of each step (undefined: not reached). */
  async function chain(key: string, target: Actor & { password: string }): Promise<Record<Step, boolean>> {
    const api = asKey(t.app, key);
    const newPassword = `taken-${randomBytes(8).toString('hex')}`;
    const done = {} as Record<Step, boolean>;
    const newEmail = `taken-${randomBytes(4).toString('hex')}@example.com`;
    done.password = (await api.put(`/v3/users/${target.id}`, { password: newPassword })).status === 200;
    done.email = (await api.put(`/v3/users/${target.id}`, { email: newEmail })).status === 200;
    done['sign in'] = (await browser(t.app).signIn(done.email ? newEmail : target.email, newPassword)).status === 303;
    done['mint another'] = (await api.post(`/v3/users/${target.id}/api_keys`, { name: 'another' })).status === 201;
    done.cancel = (await api.post(`/v3/users/${target.id}/cancel`)).status === 200;
    return done;
  }

  const relations = ['same team', 'other team'] as const;
  for (const minterRole of ROLE_NAMES) {
    for (const victimRole of ROLE_NAMES) {
      for (const relation of relations) {
        test(`${minterRole} minting for a ${victimRole} of the ${relation}`, async () => {
          const team = await createTeam(t);
          const minter = await createUser(t, minterRole, team);
          const victimTeam = relation === 'same team' ? team : await createTeam(t);
          // Two identical victims: one attacked through a minted key, one by the minter directly.
          const throughKey = await victim(victimRole, victimTeam);
          const direct = await victim(victimRole, victimTeam);

          const minted = await asKey(t.app, minter.key).post(`/v3/users/${throughKey.id}/api_keys`, { name: 'minted' });
          const mayMint = minterRole === 'Administrator';
          assert.equal(minted.status, mayMint ? 201 : 403, minted.raw);
          if (minted.status === 201) assert.equal(minted.body.created_by, minter.id);

          const directly = await chain(minter.key, direct);
          if (minted.status !== 201) {
            // Nothing to attack with: the victim's own password still signs them in.
            assert.equal((await browser(t.app).signIn(throughKey.email, throughKey.password)).status, 303);
            return;
          }
          const viaKey = await chain(minted.body.key, throughKey);
          for (const step of STEPS) {
            assert.ok(!viaKey[step] || directly[step], `${step}: the minted key did what its minter could not`);
          }
        });
      }
    }
  }

  test('the attack of the finding, step by step: a Team Administrator cannot take over a teammate', async () => {
    const team = await createTeam(t);
    const lead = await createUser(t, 'Team Administrator', team);
    const member = await victim('User', team);
    const api = asKey(t.app, lead.key);
    assert.equal((await api.post(`/v3/users/${member.id}/api_keys`, { name: 'CRM' })).status, 403);
    assert.equal((await api.put(`/v3/users/${member.id}`, { password: 'a-new-password-123' })).status, 403);
    assert.equal((await api.post(`/v3/users/${member.id}/cancel`)).status, 403);
    assert.equal((await browser(t.app).signIn(member.email, member.password)).status, 303, 'the member still signs in');
    // Managing the member otherwise stays the Team Administrator's: renaming, revoking their keys.
    assert.equal((await api.put(`/v3/users/${member.id}`, { first_name: 'Renamed' })).status, 200);
    const keys = await api.get(`/v3/users/${member.id}/api_keys`);
    assert.equal((await api.delete(`/v3/api_keys/${keys.body.data[0].id}`)).status, 200);
  });

  test('a user holds at most API_KEYS_PER_USER live keys (409 past it; a revoked key frees its place)', async () => {
    const user = await createUser(t, 'User');
    const api = asKey(t.app, user.key);
    const limit = t.config.apiKeysPerUser;
    // The factory's key is the first.
    const made = await Promise.all(
      Array.from({ length: limit + 5 }, (_, i) => api.post(`/v3/users/${user.id}/api_keys`, { name: `k${i}` })),
    );
    assert.equal(made.filter((r) => r.status === 201).length, limit - 1, 'concurrent mints cannot pass the cap');
    const refused = made.find((r) => r.status === 409);
    assert.ok(refused);
    assert.match(refused.body.detail, new RegExp(`${limit} live API keys`));
    const first = made.find((r) => r.status === 201);
    assert.equal((await api.delete(`/v3/api_keys/${first?.body.id}`)).status, 200);
    assert.equal((await api.post(`/v3/users/${user.id}/api_keys`, { name: 'again' })).status, 201);
  });
});
