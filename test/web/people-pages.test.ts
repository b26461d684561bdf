import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { client, dsn, type Sent, sendTo, startInboundApp } from '../inbound/support.ts';
import type { SendingApp } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import { HOSTILE } from './support/browser.ts';
import { browser, csrfToken, setPassword } from './web-client.ts';

const PASSWORD = 'people pages passphrase';

/** `/suppressions`, `/replies` and `/contacts`, against the API's own answers. */
describe('the pages of replies, contacts and suppressions', () => {
  let s: SendingApp & { port: number };
  let agent: Actor;
  let lead: Actor;
  let stranger: Actor;
  let sent: Sent;
  before(async () => {
    s = await startInboundApp({ INBOUND_FORWARDS_PER_DAY: '1' });
    const teamId = await createTeam(s.t);
    agent = await createUser(s.t, 'User', teamId);
    lead = await createUser(s.t, 'Team Administrator', teamId);
    stranger = await createUser(s.t, 'User', await createTeam(s.t));
    for (const who of [agent, lead, stranger]) await setPassword(s.t, who.id, PASSWORD);
    s.owner = agent.id;
    s.api = asKey(s.t.app, agent.key);
    sent = await sendTo(s, 4);
    const [bounced, replier, leaver] = sent.to as [Sent['to'][0], Sent['to'][0], Sent['to'][0]];
    const mta = client(s.port);
    await mta.sendMail({
      envelope: { from: '', to: bounced.returnPath },
      raw: dsn(bounced.returnPath, bounced.email, '5.1.1', '<dsn-1@mx.example.net>'),
    });
    for (const [i, words] of [`Yes please! ${HOSTILE.script}${HOSTILE.onerror}`, 'And one more thing'].entries()) {
      await mta.sendMail({
        from: replier.email,
        to: replier.replyTo,
        subject: 'Re: A question',
        text: words,
        html: `<p>${words}</p>`,
        messageId: `<r-${i}@client.example>`,
      });
    }
    await mta.sendMail({ from: leaver.email, to: leaver.unsubscribe, subject: 'unsubscribe', text: '', messageId: '<u-1@client.example>' });
    await waitFor('the bounce and the unsubscribe recorded', async () => {
      const statuses = await Promise.all([bounced, leaver].map(async (c) => (await s.api.get(`/v3/contacts/${c.contactId}`)).body.status));
      return statuses[0] === 'Inactive - Hard Bounce' && statuses[1] === 'Unsubscribed';
    });
  });
  after(() => s.close());

  async function signedIn(email: string) {
    const b = browser(s.t.app);
    assert.equal((await b.signIn(email, PASSWORD)).status, 303);
    return b;
  }

  test('/suppressions lists the bounced address with its reason; lifting it there makes the API show the contact free', async () => {
    const [bounced, , leaver] = sent.to as [Sent['to'][0], Sent['to'][0], Sent['to'][0]];
    const b = await signedIn(agent.email);
    const list = await b.get('/suppressions');
    assert.equal(list.status, 200);
    const row = (key: string) => new RegExp(`<tr data-suppression="${key}">([\\s\\S]*?)</tr>`).exec(list.html)?.[1] ?? '';
    const api = (await s.api.get(`/v3/contacts/${bounced.contactId}`)).body;
    assert.equal(api.email_suppression.reason, 'hard_bounce');
    const bouncedRow = row(`email:${bounced.contactId}`);
    assert.match(bouncedRow, new RegExp(bounced.email.replace('.', '\\.')));
    assert.match(bouncedRow, /<td>Hard bounce<\/td>/);
    assert.match(bouncedRow, new RegExp(`<a href="/emails/${sent.emailId}">`), 'the deciding message');
    assert.match(bouncedRow, new RegExp(`value="email:${bounced.contactId}"`));
    const leaverRow = row(`email:${leaver.contactId}`);
    assert.match(leaverRow, /<td>Unsubscribed<\/td>/);
    assert.match(leaverRow, /only their own word lifts it/);
    assert.doesNotMatch(leaverRow, /type="checkbox"/, 'an unsubscribe cannot be selected');

    // The confirmation changes nothing; an unsubscribe asked for anyway is listed as not lifted.
    const confirm = await b.get(`/suppressions/lift?selected=email:${bounced.contactId}&selected=email:${leaver.contactId}`);
    assert.equal(confirm.status, 200);
    assert.match(confirm.html, /Not lifted[\s\S]*only their own word lifts it/);
    assert.equal((await s.api.get(`/v3/contacts/${bounced.contactId}`)).body.status, 'Inactive - Hard Bounce');
    const lifted = await b.post('/suppressions/lift', { selected: `email:${bounced.contactId}` });
    assert.equal(lifted.status, 303);
    assert.equal(lifted.location, '/suppressions?lifted=1');
    const freed = (await s.api.get(`/v3/contacts/${bounced.contactId}`)).body;
    assert.equal(freed.status, 'Subscribed');
    assert.equal(freed.email_suppression, null);
    // A forged selection of the unsubscribe lifts nothing: the API's rule decides.
    await b.get('/suppressions');
    assert.equal((await b.post('/suppressions/lift', { selected: `email:${leaver.contactId}` })).location, '/suppressions?lifted=0');
    assert.equal((await s.api.get(`/v3/contacts/${leaver.contactId}`)).body.status, 'Unsubscribed');
    assert.doesNotMatch((await b.get('/suppressions?lifted=1')).html, new RegExp(`data-suppression="email:${bounced.contactId}"`));

    assert.equal((await b.get('/suppressions/lift')).status, 400);
    assert.equal((await b.get('/suppressions/lift?selected=mail:1')).status, 400);
    assert.equal((await b.get('/suppressions?after=-1')).status, 400);
    assert.equal((await b.post('/suppressions/lift', { selected: 'x', _csrf: '' })).status, 403);
  });

  test("another team's User sees none of the agent's suppressions and lifts none; the Team Administrator acting for the agent does", async () => {
    const [, , leaver] = sent.to as [Sent['to'][0], Sent['to'][0], Sent['to'][0]];
    const outsider = await signedIn(stranger.email);
    assert.doesNotMatch((await outsider.get('/suppressions')).html, new RegExp(`data-suppression="email:${leaver.contactId}"`));
    const teamLead = await signedIn(lead.email);
    await teamLead.get('/suppressions');
    assert.equal((await teamLead.post('/acting-for', { user_id: String(agent.id), return_to: '/suppressions' })).status, 303);
    assert.match((await teamLead.get('/suppressions')).html, new RegExp(`data-suppression="email:${leaver.contactId}"`));
  });

  test("/replies shows the reply's words as text, its hostile HTML not run, and the held one marked with its reason", async () => {
    const api = (await s.api.get(`/v3/templated_emails/${sent.emailId}/replies`)).body.data as any[];
    assert.equal(api.length, 2);
    const b = await signedIn(agent.email);
    const page = await b.get('/replies');
    assert.equal(page.status, 200);
    for (const reply of api) {
      const shown = new RegExp(`<article class="card reply" data-reply="${reply.id}"[\\s\\S]*?</article>`).exec(page.html)?.[0] ?? '';
      assert.match(shown, new RegExp(`<a href="/emails/${sent.emailId}">`), 'the message it answers');
      assert.match(shown, new RegExp(`<a href="/contacts/${reply.contact_id}">`));
      if (reply.held_reason) assert.match(shown, /data-held><strong>Held: this contact had reached the day’s forwards/);
      else assert.doesNotMatch(shown, /data-held/);
      assert.match(
        shown,
        new RegExp(`SPF ${reply.authentication.spf}, DKIM ${reply.authentication.dkim}, DMARC ${reply.authentication.dmarc}`),
      );
    }
    assert.match(page.html, /Yes please! &lt;script&gt;/);
    assert.match(page.html, /And one more thing/);
    assert.doesNotMatch(page.html, /<script>alert|<img src=x onerror/);
    assert.equal((await b.get('/replies?before=0')).status, 400);
    const older = await b.get(`/replies?before=${Math.max(...api.map((r) => r.id))}`);
    assert.equal([...older.html.matchAll(/data-reply="/g)].length, 1, 'keys, not offsets: the older one alone');
    assert.doesNotMatch((await (await signedIn(stranger.email)).get('/replies')).html, /data-reply="/);
  });

  test("/contacts finds a contact as the API's search does; /contacts/{id} shows the email sent, the outcome, the replies and tags; another team's User gets 403", async () => {
    const [bounced, replier] = sent.to as [Sent['to'][0], Sent['to'][0]];
    const b = await signedIn(agent.email);
    const api = (await s.api.get(`/v3/users/${agent.id}/contacts?email=${encodeURIComponent(replier.email)}`)).body;
    const list = await b.get(`/contacts?q=${encodeURIComponent(replier.email)}`);
    assert.equal(list.status, 200);
    assert.deepEqual(
      [...list.html.matchAll(/data-contact="(\d+)"/g)].map((m) => Number(m[1])),
      api.data.map((c: { id: number }) => c.id),
    );
    assert.equal((await b.get('/contacts?page=0')).status, 400);
    const caller = await s.api.post(`/v3/users/${agent.id}/contacts`, { first_name: 'Phone Only', phone: '(727) 555-0134' });
    assert.equal(caller.status, 201, caller.raw);
    assert.match((await b.get('/contacts?q=(727) 555')).html, new RegExp(`data-contact="${caller.body.id}"`), 'a number by its digits');
    assert.doesNotMatch(
      (await b.get('/contacts?q=Zed 7')).html,
      new RegExp(`data-contact="${caller.body.id}"`),
      'a word with a digit is no number',
    );

    const page = await b.get(`/contacts/${replier.contactId}`);
    assert.equal(page.status, 200);
    const contact = (await s.api.get(`/v3/contacts/${replier.contactId}`)).body;
    assert.match(page.html, new RegExp(`<dd data-status>${contact.status}</dd>`));
    for (const tag of contact.tags) assert.match(page.html, new RegExp(tag));
    assert.match(page.html, new RegExp(`<a href="/emails/${sent.emailId}">Email ${sent.emailId}</a>`), 'the email in the history');
    assert.equal([...page.html.matchAll(/data-reply="/g)].length, 2, 'both replies');
    assert.match(page.html, /data-held>/);
    const history = await b.get(`/contacts/${bounced.contactId}`);
    assert.match(history.html, /Bounced<\/td>\s*<td>User unknown \(permanent\): 5\.1\.1/);

    const outsider = await signedIn(stranger.email);
    assert.equal((await outsider.get(`/contacts/${replier.contactId}`)).status, 403);
    assert.equal((await outsider.get('/contacts/99999999')).status, 404);
    assert.doesNotMatch((await outsider.get('/contacts')).html, new RegExp(`data-contact="${replier.contactId}"`));
    assert.equal((await (await signedIn(lead.email)).get(`/contacts/${replier.contactId}`)).status, 200);
  });

  test('a held reply: Release forwards it to the agent exactly once, through the relay; Discard never forwards it', async () => {
    const [, replier, , writer] = sent.to as [Sent['to'][0], Sent['to'][0], Sent['to'][0], Sent['to'][0]];
    const mta = client(s.port);
    // INBOUND_FORWARDS_PER_DAY=1: the first goes to the agent, the two after it are held.
    for (const i of [0, 1, 2]) {
      await mta.sendMail({
        from: writer.email,
        to: writer.replyTo,
        subject: `Re: held ${i}`,
        text: `Held words ${i}`,
        messageId: `<h-${i}@client.example>`,
      });
    }
    const mine = await waitFor('the three replies stored', async () => {
      const data = (await s.api.get(`/v3/templated_emails/${sent.emailId}/replies?contact_id=${writer.contactId}`)).body.data as any[];
      return data.length === 3 ? data : undefined;
    });
    const [toRelease, toDiscard] = mine.filter((r) => r.held_reason === 'forward_limit').map((r) => r.id as number) as [number, number];
    assert.ok(toRelease && toDiscard, 'two held');
    const forwardsOf = (id: number) => s.sink.messages.filter((m) => m.messageId.startsWith(`<reply-${id}@`));
    assert.equal(forwardsOf(toRelease).length, 0, 'held: not forwarded');

    const b = await signedIn(agent.email);
    const list = await b.get('/replies');
    const token = csrfToken(list.html) ?? '';
    const card = (html: string, id: number) => new RegExp(`data-reply="${id}"[\\s\\S]*?</article>`).exec(html)?.[0] ?? '';
    assert.match(card(list.html, toRelease), new RegExp(`href="/replies/${toRelease}/release">Release<`));
    assert.match(card(list.html, toRelease), new RegExp(`href="/replies/${toRelease}/discard">Discard<`));
    assert.doesNotMatch(card(list.html, mine.find((r) => !r.held_reason).id), /\/release"/, 'a forwarded reply has no Release');

    // The confirmation changes nothing; the relay refusing gives the claim back.
    const confirm = await b.get(`/replies/${toRelease}/release`);
    assert.equal(confirm.status, 200);
    assert.match(confirm.html, /Release and forward it to me/);
    assert.equal(forwardsOf(toRelease).length, 0);
    s.sink.behave({ mailFrom: () => ({ code: 554, message: '5.7.1 Not now' }) });
    const refused = await b.post(`/replies/${toRelease}/release`, { _csrf: token });
    assert.equal(refused.status, 503);
    s.sink.behave({});
    await b.get(`/replies/${toRelease}/release`);
    const released = await b.post(`/replies/${toRelease}/release`, { _csrf: token });
    assert.equal(released.status, 303);
    assert.equal(released.location, `/replies?done=released#reply-${toRelease}`);
    const [forward] = forwardsOf(toRelease);
    assert.ok(forward, 'forwarded through the relay');
    assert.match(forward.raw, /Held words 1/);
    assert.match(forward.raw, /you released it/);
    // Again, and Discard after it: nothing more.
    await b.get(`/replies/${toRelease}/release`);
    assert.equal((await b.post(`/replies/${toRelease}/release`, { _csrf: token })).location, `/replies?done=unchanged#reply-${toRelease}`);
    assert.equal((await b.post(`/replies/${toRelease}/discard`, { _csrf: token })).location, `/replies?done=unchanged#reply-${toRelease}`);

    await b.get(`/replies/${toDiscard}/discard`);
    assert.equal((await b.post(`/replies/${toDiscard}/discard`, { _csrf: token })).location, `/replies?done=discarded#reply-${toDiscard}`);
    assert.equal((await b.post(`/replies/${toDiscard}/release`, { _csrf: token })).location, `/replies?done=unchanged#reply-${toDiscard}`);

    // Two Releases at once of the replier's held reply: one forward.
    const repliersHeld = (
      (await s.api.get(`/v3/templated_emails/${sent.emailId}/replies?contact_id=${replier.contactId}`)).body.data as any[]
    ).find((r) => r.held_reason);
    const heldOther = repliersHeld.id as number;
    await b.get('/replies');
    const both = await Promise.all([
      b.post(`/replies/${heldOther}/release`, { _csrf: token }),
      b.post(`/replies/${heldOther}/release`, { _csrf: token }),
    ]);
    assert.deepEqual(both.map((p) => p.location?.split('#')[0]).sort(), ['/replies?done=released', '/replies?done=unchanged']);

    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(forwardsOf(toRelease).length, 1, 'released: forwarded exactly once');
    assert.equal(forwardsOf(heldOther).length, 1, 'released twice at once: forwarded once');
    assert.equal(forwardsOf(toDiscard).length, 0, 'discarded: never forwarded');
    const after = await b.get('/replies?done=released');
    assert.match(after.html, /The reply was forwarded to you/);
    assert.match(card(after.html, toRelease), /data-decided>Released .* and forwarded to you/);
    assert.match(card(after.html, toDiscard), /data-decided>Discarded .*: it will never be forwarded/);
    assert.doesNotMatch(card(after.html, toDiscard), /\/release"/);

    // Another team's User: 403 on the page and the form; an unknown id 404; no token 403.
    const outsider = await signedIn(stranger.email);
    assert.equal((await outsider.get(`/replies/${toDiscard}/release`)).status, 403);
    await outsider.get('/replies');
    assert.equal((await outsider.post(`/replies/${toDiscard}/discard`)).status, 403);
    assert.equal((await b.get('/replies/99999999/release')).status, 404);
    assert.equal((await b.post(`/replies/${toDiscard}/discard`, { _csrf: '' })).status, 403);
  });
});
