import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ACTING_FOR_COOKIE } from '../../src/web/viewer.ts';
import { createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { browser, setPassword } from './web-client.ts';

const PASSWORD = 'layout test passphrase';
const NAV = ['Dashboard', 'Emails', 'Drops', 'Replies', 'Contacts', 'Suppressions', 'Settings'];

/** The layout every signed-in page shares: the navigation, and the switcher to act for another user under the one access rule. */
describe('the signed-in layout', () => {
  let t: TestApp;
  let teamId: number;
  before(async () => {
    t = await startTestApp();
    teamId = await createTeam(t);
  });
  after(() => t.close());

  async function signedIn(role: 'User' | 'Team Administrator' | 'Administrator', team: number | null = teamId, first_name = 'Test') {
    const user = await createUser(t, role, team, { first_name });
    await setPassword(t, user.id, PASSWORD);
    const b = browser(t.app);
    assert.equal((await b.signIn(user.email, PASSWORD)).status, 303);
    return { user, b };
  }

  test('every entry of the navigation, the current one marked; a User has no switcher and may not act for anyone', async () => {
    const { user, b } = await signedIn('User');
    const teammate = await createUser(t, 'User', teamId);
    const page = await b.get('/account/settings');
    const links = [...page.html.matchAll(/<nav class="site-nav"[\s\S]*?<\/nav>/g)][0]?.[0] ?? '';
    assert.deepEqual(
      [...links.matchAll(/<a href="[^"]+"[^>]*>([^<]+)<\/a>/g)].map((m) => m[1]),
      NAV,
    );
    assert.match(links, /href="\/account\/settings" aria-current="page">Settings/);
    assert.doesNotMatch(page.html, /Acting for/);
    const refused = await b.post('/acting-for', { user_id: String(teammate.id), return_to: '/account/settings' });
    assert.equal(refused.status, 403);
    assert.equal(b.jar.has(ACTING_FOR_COOKIE), false);
    assert.equal((await b.post('/acting-for', { user_id: String(user.id) })).status, 303, 'acting for oneself is no change');
  });

  test("a Team Administrator acts for a teammate (the API's read rule), never for a higher role or another team", async () => {
    const { user, b } = await signedIn('Team Administrator', teamId, 'Tess');
    const agent = await createUser(t, 'User', teamId, { first_name: 'Agnes' });
    const boss = await createUser(t, 'Administrator', teamId, { first_name: 'Bo' });
    const stranger = await createUser(t, 'User', await createTeam(t), { first_name: 'Stan' });

    const page = await b.get('/account/settings');
    const options = [...page.html.matchAll(/<option value="(\d+)"/g)].map((m) => Number(m[1]));
    assert.ok(options.includes(user.id) && options.includes(agent.id), 'themself and the agent');
    assert.ok(!options.includes(stranger.id) && !options.includes(boss.id), 'no one of another team, nor of a higher role');

    const switched = await b.post('/acting-for', { user_id: String(agent.id), return_to: '/account/settings/integrations' });
    assert.equal(switched.status, 303);
    assert.equal(switched.location, '/account/settings/integrations', 'back to the page the switcher was on');
    const acting = await b.get('/account/settings');
    assert.match(acting.html, /You are acting for <strong>Agnes User<\/strong>/);
    assert.match(acting.html, new RegExp(`<option value="${agent.id}" selected>`));

    for (const other of [stranger, boss]) {
      const refused = await b.post('/acting-for', { user_id: String(other.id) });
      assert.equal(refused.status, 403, `user ${other.id}`);
    }
    assert.equal(b.jar.get(ACTING_FOR_COOKIE), String(agent.id), 'the refused choices changed nothing');

    // A cookie naming someone out of reach is ignored: the pages are the session's own again.
    b.jar.set(ACTING_FOR_COOKIE, String(stranger.id));
    assert.doesNotMatch((await b.get('/account/settings')).html, /You are acting for/);

    assert.equal(
      (await b.post('/acting-for', { user_id: String(user.id), return_to: '//evil.example/x' })).location,
      '/',
      'never off-site',
    );
    assert.equal(b.jar.has(ACTING_FOR_COOKIE), false, 'choosing oneself clears the choice');
  });

  test('an Administrator may act for anyone; a malformed choice is a 400, not a 500', async () => {
    const { b } = await signedIn('Administrator', null);
    const stranger = await createUser(t, 'User', await createTeam(t), { first_name: 'Stan' });
    await b.get('/account/settings');
    assert.equal((await b.post('/acting-for', { user_id: String(stranger.id) })).status, 303);
    assert.match((await b.get('/account/settings')).html, /You are acting for <strong>Stan User<\/strong>/);
    assert.equal((await b.post('/acting-for', { user_id: 'x' })).status, 400);
    assert.equal((await b.post('/acting-for', { user_id: '99999999' })).status, 404);
  });

  test('a sign-in from a bookmarked page goes back to it, never to another site', async () => {
    const user = await createUser(t, 'User', teamId);
    await setPassword(t, user.id, PASSWORD);
    const b = browser(t.app);
    const form = await b.get('/login?next=%2Faccount%2Fsettings%2Fintegrations');
    assert.match(form.html, /name="next" value="\/account\/settings\/integrations"/);
    assert.equal(
      (await b.post('/login', { email: user.email, password: PASSWORD, next: '/account/settings/integrations' })).location,
      '/account/settings/integrations',
    );
    const other = browser(t.app);
    await other.get('/login');
    assert.equal((await other.post('/login', { email: user.email, password: PASSWORD, next: '//evil.example' })).location, '/');
  });

  test('/users: a Team Administrator sees the users they manage and sends an invitation, shown once; a User gets 403', async () => {
    const { user: lead, b } = await signedIn('Team Administrator', teamId, 'Lena');
    const fresh = await createUser(t, 'User', teamId, { first_name: 'Fresh' });
    const signedUp = await createUser(t, 'User', teamId, { first_name: 'Sid' });
    await setPassword(t, signedUp.id, PASSWORD);
    const peer = await createUser(t, 'Team Administrator', teamId, { first_name: 'Petra' });
    const stranger = await createUser(t, 'User', await createTeam(t), { first_name: 'Stan' });

    const list = await b.get('/users');
    assert.equal(list.status, 200);
    assert.match(list.html, /<a href="\/users" aria-current="page">Users<\/a>/);
    const shown = new Set([...list.html.matchAll(/data-user="(\d+)"/g)].map((m) => Number(m[1])));
    for (const id of [lead.id, fresh.id, signedUp.id]) assert.ok(shown.has(id), `user ${id} listed`);
    for (const id of [peer.id, stranger.id]) assert.ok(!shown.has(id), `user ${id}, a peer or another team's, not listed`);
    const row = (html: string, id: number) => new RegExp(`data-user="${id}">([\\s\\S]*?)</tr>`).exec(html)?.[1] ?? '';
    assert.match(row(list.html, fresh.id), /<td>User<\/td>\s*<td>Active<\/td>/);
    assert.match(row(list.html, fresh.id), new RegExp(`action="/users/${fresh.id}/invitation"`));
    assert.match(row(list.html, signedUp.id), /Has a password/);
    assert.doesNotMatch(row(list.html, signedUp.id), /invitation/);

    const sent = await b.post(`/users/${fresh.id}/invitation`);
    assert.equal(sent.status, 303);
    assert.equal(sent.location, '/users');
    const once = await b.get('/users');
    const url = /id="invitation-link"[^>]*value="([^"]+)"/.exec(once.html)?.[1] ?? '';
    assert.match(url, /\/invitation\/[\w-]{43}$/);
    assert.match(once.html, /The invitation for Fresh User/);
    assert.equal((await b.get(new URL(url).pathname)).status, 200, 'the link works');
    assert.doesNotMatch((await b.get('/users')).html, /invitation-link/, 'shown once');

    await b.get('/users');
    assert.equal((await b.post(`/users/${signedUp.id}/invitation`)).status, 409, 'a user with a password gets none');
    await b.get('/users');
    assert.equal((await b.post(`/users/${peer.id}/invitation`)).status, 403, 'a peer is not theirs to manage');
    await b.get('/users');
    assert.equal((await b.post(`/users/${stranger.id}/invitation`)).status, 403);

    const { b: agent } = await signedIn('User');
    const page = await agent.get('/');
    assert.doesNotMatch(page.html, /href="\/users"/, 'not in a User’s navigation');
    assert.equal((await agent.get('/users')).status, 403);
    assert.equal((await agent.post(`/users/${fresh.id}/invitation`)).status, 403);

    const { b: admin } = await signedIn('Administrator', null);
    let all = '';
    for (let page = 1, more = true; more; page++) {
      const html = (await admin.get(`/users?page=${page}`)).html;
      all += html;
      more = html.includes('rel="next"');
    }
    for (const id of [peer.id, stranger.id]) assert.match(all, new RegExp(`data-user="${id}"`), 'an Administrator manages everyone');
    assert.equal((await admin.get('/users?page=0')).status, 400);
  });
});
