import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { HOSTILE, HOSTILE_TEXT } from './support/browser.ts';
import { type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';
import { browser, setPassword } from './web-client.ts';

const PASSWORD = 'webhook pages passphrase';
const WEBHOOKS = '/account/settings/webhooks';

/** The error summary's messages, in order. */
function summary(html: string): string[] {
  const block = /<div class="error-summary"[\s\S]*?<\/ul>/.exec(html)?.[0] ?? '';
  return [...block.matchAll(/<a href="#[^"]+">([^<]*)<\/a>/g)].map((m) => m[1] as string);
}

/** `/account/settings/webhooks` over HTTP: the API's rules (access, validation), every form answered with a redirect. */
describe('the webhook pages', () => {
  let t: TestApp;
  let receiver: HttpReceiver;
  let agent: Actor;
  let lead: Actor;
  let stranger: Actor;
  before(async () => {
    receiver = await startHttpReceiver();
    // The receiver answers with hostile text: a failed attempt shows the start of the answer.
    receiver.respond = () => ({ status: 500, body: `<h1>Oops</h1>${HOSTILE_TEXT}` });
    t = await startTestApp({
      workers: true,
      env: {
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_POLL_INTERVAL: '50ms',
        // Long enough that a failed attempt is not retried while the test reads it.
        WEBHOOK_RETRY_BASE: '1h',
      },
    });
    const teamId = await createTeam(t);
    agent = await createUser(t, 'User', teamId);
    lead = await createUser(t, 'Team Administrator', teamId);
    stranger = await createUser(t, 'User', await createTeam(t));
    for (const who of [agent, lead, stranger]) await setPassword(t, who.id, PASSWORD);
  });
  after(async () => {
    await t?.close();
    await receiver?.close();
  });

  async function signedIn(who: Actor) {
    const b = browser(t.app);
    assert.equal((await b.signIn(who.email, PASSWORD)).status, 303);
    return b;
  }

  test('adding an endpoint: the API’s messages on a refused form, the secret shown once after the redirect, the API lists it', async () => {
    const b = await signedIn(agent);
    const tab = await b.get(WEBHOOKS);
    assert.equal(tab.status, 200);
    assert.match(tab.html, /<a href="\/account\/settings\/webhooks" aria-current="page">Webhooks<\/a>/);
    assert.doesNotMatch(tab.html, /name="scope"/, 'a User makes only endpoints of their own events');

    const empty = await b.post(WEBHOOKS, { url: '', description: 'kept' });
    assert.equal(empty.status, 422);
    assert.deepEqual(summary(empty.html), ['URL must not be empty.', 'Events must have at least 1 items.']);
    assert.match(empty.html, /id="description" name="description" type="text" value="kept"/, 'what was typed is kept');
    assert.match(empty.html, /id="url" name="url" type="url" value=""[^>]*aria-invalid="true"/);
    const ftp = await b.post(WEBHOOKS, { url: 'ftp://crm.example.com/in', events: 'contact.created' });
    assert.deepEqual(summary(ftp.html), ['URL must be an http:// or https:// URL.']);
    assert.match(ftp.html, /value="contact\.created" checked/);
    // A User may not make a team endpoint, whatever the form says: the API's rule (403).
    assert.equal((await b.post(WEBHOOKS, { url: receiver.url, events: 'contact.created', scope: 'team' })).status, 403);

    const hostileUrl = `${receiver.url}?q="><script>alert(1)</script>`;
    const made = await b.post(WEBHOOKS, { url: hostileUrl, events: ['contact.created', 'delivery.bounced'], description: HOSTILE.onerror });
    assert.equal(made.status, 303, made.html);
    const id = Number(/\/account\/settings\/webhooks\/(\d+)$/.exec(made.location ?? '')?.[1]);
    assert.ok(id > 0, made.location);
    const page = await b.get(made.location as string);
    assert.equal(page.status, 200);
    const secret = /id="new-secret"[^>]*value="(whsec_[^"]+)"/.exec(page.html)?.[1];
    assert.ok(secret, 'the secret is shown');
    assert.doesNotMatch(page.html, /<script>alert|<img src=x/, 'hostile URL and description inert');
    assert.doesNotMatch((await b.get(made.location as string)).html, /whsec_/, 'and never again');

    const api = (await asKey(t.app, agent.key).get(`/v3/users/${agent.id}/webhooks`)).body.data;
    assert.deepEqual(
      api.map((e: any) => [e.id, e.url, e.events, e.description, e.scope, e.enabled]),
      [[id, hostileUrl, ['contact.created', 'delivery.bounced'], HOSTILE.onerror, 'user', true]],
    );
    const list = await b.get(WEBHOOKS);
    assert.match(list.html, new RegExp(`<tr data-endpoint="${id}">`));
    assert.doesNotMatch(list.html, /<script>alert|<img src=x/);
    assert.equal((await b.post(WEBHOOKS, { url: receiver.url, events: 'contact.created', _csrf: '' })).status, 403);

    // A new secret, shown once as the first was; both sign for a day.
    const rotated = await b.post(`${WEBHOOKS}/${id}/rotate`);
    assert.equal(rotated.location, `${WEBHOOKS}/${id}`);
    const after = await b.get(`${WEBHOOKS}/${id}`);
    const second = /id="new-secret"[^>]*value="(whsec_[^"]+)"/.exec(after.html)?.[1];
    assert.ok(second && second !== secret, 'a new secret, shown');
    assert.match(after.html, /<dt>Previous secret<\/dt><dd>Signs beside the current one until /);
    assert.ok((await asKey(t.app, agent.key).get(`/v3/webhooks/${id}`)).body.previous_secret_expires_at);
    assert.doesNotMatch((await b.get(`${WEBHOOKS}/${id}`)).html, /whsec_/);

    // Signed with the secrets shown: a test event verifies with either.
    await b.post(`${WEBHOOKS}/${id}/test`);
    const post = await waitFor('the test event', () => receiver.received[0]);
    for (const key of [secret, second]) {
      const event = new Webhook(key).verify(post.body, post.headers as Record<string, string>) as { type: string };
      assert.equal(event.type, 'webhook.test');
    }
  });

  test('test, disable, enable, resend one and since a time, delete: each a POST answered with a redirect, as the API does it', async () => {
    const before = receiver.received.length;
    const made = await asKey(t.app, agent.key).post(`/v3/users/${agent.id}/webhooks`, { url: receiver.url, events: ['contact.created'] });
    const id = made.body.id as number;
    const b = await signedIn(agent);
    await b.get(`${WEBHOOKS}/${id}`);
    const queued = await b.post(`${WEBHOOKS}/${id}/test`);
    assert.equal(queued.status, 303);
    assert.equal(queued.location, `${WEBHOOKS}/${id}`);
    const delivery = await waitFor('the attempt recorded', async () => {
      const [d] = (await asKey(t.app, agent.key).get(`/v3/webhooks/${id}/deliveries`)).body.data;
      return d?.attempt_log.length === 1 && d;
    });
    const page = await b.get(`${WEBHOOKS}/${id}`);
    assert.match(page.html, /A test event was queued \(delivery \d+\)/, 'the notice, once');
    assert.doesNotMatch((await b.get(`${WEBHOOKS}/${id}`)).html, /A test event was queued/);
    const shown = new RegExp(`<article class="delivery" data-delivery="${delivery.id}"[\\s\\S]*?</article>`).exec(page.html)?.[0] ?? '';
    assert.match(shown, /webhook\.test: <span data-delivery-state>Waiting<\/span>/, 'pending its retry');
    assert.match(shown, /<td>Failed<\/td>\s*<td>500<\/td>/);
    assert.match(shown, new RegExp(`${delivery.attempt_log[0].duration_ms.toLocaleString('en-US')} ms`));
    assert.match(shown, /HTTP 500: &lt;h1&gt;Oops&lt;\/h1&gt;&lt;script&gt;/, "the receiver's answer, as text");
    assert.doesNotMatch(page.html, /<script>alert|<img src=x|<svg onload|<style>body/);
    const filtered = await b.get(`${WEBHOOKS}/${id}?state=delivered`);
    assert.doesNotMatch(filtered.html, /data-delivery="/, 'filtered by state, as the API’s listing');
    assert.match(filtered.html, /No delivery in that state/);
    assert.match((await b.get(`${WEBHOOKS}/${id}?state=pending`)).html, new RegExp(`data-delivery="${delivery.id}"`));
    assert.equal((await b.get(`${WEBHOOKS}/${id}?state=lost`)).status, 400);

    // Resend one: the same event again, with the same webhook-id.
    assert.equal((await b.post(`${WEBHOOKS}/${id}/deliveries/${delivery.id}/resend`)).status, 303);
    await waitFor('the event posted again', () => receiver.received.length >= before + 2);
    const ids = receiver.received.slice(before).map((r) => r.headers['webhook-id']);
    assert.deepEqual(ids, [delivery.webhook_id, delivery.webhook_id]);

    // Disabled: no test, no resend, the API's words in the summary; enabled again. (Each form is
    // posted from the page the last redirect led to, as a browser does, with that page's token.)
    await b.get(`${WEBHOOKS}/${id}`);
    assert.equal((await b.post(`${WEBHOOKS}/${id}/disable`)).status, 303);
    assert.equal((await asKey(t.app, agent.key).get(`/v3/webhooks/${id}`)).body.enabled, false);
    assert.match((await b.get(`${WEBHOOKS}/${id}`)).html, /<dd class="breakable" data-state>Disabled<\/dd>/);
    const refused = await b.post(`${WEBHOOKS}/${id}/test`);
    assert.equal(refused.status, 422);
    assert.deepEqual(summary(refused.html), ['Not sent: the endpoint is disabled; enable it first.']);
    assert.equal((await b.post(`${WEBHOOKS}/${id}/enable`)).status, 303);
    assert.equal((await asKey(t.app, agent.key).get(`/v3/webhooks/${id}`)).body.enabled, true);

    await b.get(`${WEBHOOKS}/${id}`);
    assert.deepEqual(summary((await b.post(`${WEBHOOKS}/${id}/resend`, { since: '' })).html), [
      'Since must be a date and a time, such as 2026-07-12T16:56.',
    ]);
    const backwards = await b.post(`${WEBHOOKS}/${id}/resend`, { since: '2026-07-12T16:56', until: '2026-07-12T10:00' });
    assert.equal(backwards.status, 422);
    assert.deepEqual(summary(backwards.html), ['Until must be after since.']);
    assert.match(backwards.html, /id="since" name="since" type="datetime-local" value="2026-07-12T16:56"/);
    await asKey(t.app, agent.key).post(`/v3/users/${agent.id}/contacts`, { first_name: 'Resent', email: 'resent@example.com' });
    // A delivery being sent is left alone by a resend: wait until the contact's first one was tried.
    await waitFor('the contact.created delivery tried', async () => {
      const { data } = (await asKey(t.app, agent.key).get(`/v3/webhooks/${id}/deliveries`)).body;
      return data.some((d: any) => d.event_type === 'contact.created' && d.state !== 'sending' && d.attempts > 0);
    });
    const resent = await b.post(`${WEBHOOKS}/${id}/resend`, { since: '2020-01-01T00:00' });
    assert.equal(resent.status, 303);
    assert.match((await b.get(`${WEBHOOKS}/${id}`)).html, /1 event is queued again\./, 'the contact.created, not the test');

    // Delete: the confirmation changes nothing; the POST deletes.
    const confirm = await b.get(`${WEBHOOKS}/${id}/delete`);
    assert.equal(confirm.status, 200);
    assert.match(confirm.html, /Delete the endpoint/);
    assert.equal((await asKey(t.app, agent.key).get(`/v3/webhooks/${id}`)).status, 200);
    const deleted = await b.post(`${WEBHOOKS}/${id}/delete`);
    assert.equal(deleted.location, WEBHOOKS);
    assert.match((await b.get(WEBHOOKS)).html, /was deleted with its deliveries/);
    assert.equal((await asKey(t.app, agent.key).get(`/v3/webhooks/${id}`)).status, 404);
    assert.equal((await b.get(`${WEBHOOKS}/${id}`)).status, 404);
  });

  test('the deliveries: the newest first, 20 a page, paged back by keys', async () => {
    // A closed port: each attempt fails at once, and is retried only in an hour.
    const made = await asKey(t.app, agent.key).post(`/v3/users/${agent.id}/webhooks`, {
      url: 'http://127.0.0.1:1/',
      events: ['contact.created'],
    });
    const id = made.body.id as number;
    const queued: number[] = [];
    for (let i = 0; i < 21; i++) queued.push((await asKey(t.app, agent.key).post(`/v3/webhooks/${id}/test`)).body.delivery_id);
    const b = await signedIn(agent);
    const shown = (html: string) => [...html.matchAll(/data-delivery="(\d+)"/g)].map((m) => Number(m[1]));
    const first = await b.get(`${WEBHOOKS}/${id}`);
    assert.deepEqual(shown(first.html), queued.slice(1).reverse());
    const older = /<a href="([^"]+)" rel="next">Older deliveries<\/a>/.exec(first.html)?.[1];
    assert.equal(older, `${WEBHOOKS}/${id}?before=${queued[1]}`);
    const last = await b.get(older as string);
    assert.deepEqual(shown(last.html), [queued[0]]);
    assert.doesNotMatch(last.html, /Older deliveries/);
    assert.match(last.html, new RegExp(`<a href="${WEBHOOKS}/${id}">Newest deliveries</a>`));
    assert.equal((await b.get(`${WEBHOOKS}/${id}?before=0`)).status, 400);
  });

  test('a cancelled account reads and deletes its endpoints, as its API keys may, and changes nothing', async () => {
    const user = await createUser(t, 'User', await createTeam(t));
    await setPassword(t, user.id, PASSWORD);
    const made = await asKey(t.app, user.key).post(`/v3/users/${user.id}/webhooks`, { url: receiver.url, events: ['contact.created'] });
    assert.equal((await asKey(t.app, t.adminKey).post(`/v3/users/${user.id}/cancel`)).status, 200);
    const b = await signedIn(user);
    const tab = await b.get(WEBHOOKS);
    assert.match(tab.html, /A cancelled account cannot add endpoints/);
    assert.equal((await b.post(WEBHOOKS, { url: receiver.url, events: 'contact.created' })).status, 403);
    await b.get(`${WEBHOOKS}/${made.body.id}`);
    for (const action of ['test', 'disable', 'resend', 'rotate']) {
      assert.equal((await b.post(`${WEBHOOKS}/${made.body.id}/${action}`, { since: '2020-01-01T00:00' })).status, 403, action);
    }
    assert.equal((await b.post(`${WEBHOOKS}/${made.body.id}/delete`)).status, 303);
    assert.equal((await asKey(t.app, t.adminKey).get(`/v3/webhooks/${made.body.id}`)).status, 404);
  });

  test("another team's User gets 403 on every page of an endpoint; its Team Administrator reaches it; a team endpoint is theirs to make", async () => {
    const made = await asKey(t.app, agent.key).post(`/v3/users/${agent.id}/webhooks`, { url: receiver.url, events: ['contact.created'] });
    const id = made.body.id as number;
    const [delivery] = [(await asKey(t.app, agent.key).post(`/v3/webhooks/${id}/test`)).body.delivery_id];
    const outsider = await signedIn(stranger);
    await outsider.get(WEBHOOKS);
    assert.doesNotMatch((await outsider.get(WEBHOOKS)).html, new RegExp(`data-endpoint="${id}"`));
    for (const path of [`${WEBHOOKS}/${id}`, `${WEBHOOKS}/${id}/delete`]) assert.equal((await outsider.get(path)).status, 403, path);
    for (const action of ['test', 'disable', 'enable', 'resend', 'rotate', 'delete', `deliveries/${delivery}/resend`]) {
      assert.equal((await outsider.post(`${WEBHOOKS}/${id}/${action}`, { since: '2020-01-01T00:00' })).status, 403, action);
    }
    assert.equal((await asKey(t.app, agent.key).get(`/v3/webhooks/${id}`)).body.enabled, true, 'nothing changed');
    assert.equal((await outsider.get(`${WEBHOOKS}/999999`)).status, 404);

    const teamLead = await signedIn(lead);
    assert.equal((await teamLead.get(`${WEBHOOKS}/${id}`)).status, 200);
    assert.equal((await teamLead.post('/acting-for', { user_id: String(agent.id), return_to: WEBHOOKS })).status, 303);
    assert.match((await teamLead.get(WEBHOOKS)).html, new RegExp(`data-endpoint="${id}"`));
    assert.equal((await teamLead.post('/acting-for', { user_id: String(lead.id), return_to: WEBHOOKS })).status, 303);
    const form = await teamLead.get(WEBHOOKS);
    assert.match(form.html, /name="scope" value="team"/);
    assert.doesNotMatch(form.html, /value="service"/);
    const team = await teamLead.post(WEBHOOKS, { url: receiver.url, events: 'contact.created', scope: 'team' });
    assert.equal(team.status, 303, team.html);
    const listed = (await asKey(t.app, lead.key).get(`/v3/users/${lead.id}/webhooks`)).body.data;
    assert.deepEqual(
      listed.map((e: any) => e.scope),
      ['team'],
    );
  });
});
