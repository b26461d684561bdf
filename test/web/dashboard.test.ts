import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import { createTeam, createUser } from '../support/factories.ts';
import { browser, setPassword } from './web-client.ts';

const PASSWORD = 'dashboard test passphrase';

/** `/`: what Hopper is for a visitor; the dashboard of the user the pages are for once signed in. */
describe('the dashboard', () => {
  let s: SendingApp;
  before(async () => {
    s = await startSendingApp();
  });
  after(() => s.close());

  test('signed out: what Hopper is and Sign in, no navigation', async () => {
    const page = await browser(s.t.app).get('/');
    assert.equal(page.status, 200);
    assert.match(page.html, /<a class="button primary" href="\/login">Sign in<\/a>/);
    assert.doesNotMatch(page.html, /class="site-nav"/);
  });

  test("the last 30 days of the user's messages, what is scheduled next, and nobody else's", async () => {
    const teamId = await createTeam(s.t);
    const agent = await createUser(s.t, 'User', teamId);
    const lead = await createUser(s.t, 'Team Administrator', teamId);
    await setPassword(s.t, lead.id, PASSWORD);
    await setPassword(s.t, s.owner, PASSWORD);
    const people = await audience(s, 3);
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    await waitForStatus(s, email.id, ['Sent']);
    const later = await createEmail(s, {
      subject: 'Open house <b>Saturday</b>',
      status: 'Scheduled',
      send_type: 'Future',
      send_at: '2099-01-01T15:00:00Z',
    });

    const b = browser(s.t.app);
    await b.signIn((await s.api.get(`/v3/users/${s.owner}`)).body.email, PASSWORD);
    const page = await b.get('/');
    assert.equal(page.status, 200);
    assert.match(page.html, /<a href="\/" aria-current="page">Dashboard<\/a>/);
    assert.match(page.html, /<dt>Sent<\/dt><dd>3<\/dd>/);
    assert.match(page.html, /<svg role="img" aria-label="Sent, delivered, replies and bounces by day over the last 30 days"/);
    const today = new Date().toISOString().slice(5, 10);
    assert.match(page.html, new RegExp(`<th scope="row">${today}</th><td>3</td>`), "today's row of the chart's table");
    assert.match(page.html, new RegExp(`<a href="/emails/${later.id}">Open house &lt;b&gt;Saturday&lt;/b&gt;</a> — Jan 1, 2099`));

    // Acting for an agent with nothing sent: their figures, not the session's.
    const lb = browser(s.t.app);
    await lb.signIn(lead.email, PASSWORD);
    await lb.get('/');
    assert.equal((await lb.post('/acting-for', { user_id: String(agent.id), return_to: '/' })).location, '/');
    const theirs = await lb.get('/');
    assert.match(theirs.html, /<dt>Sent<\/dt><dd>0<\/dd>/);
    assert.match(theirs.html, /Nothing is scheduled\./);
  });
});
