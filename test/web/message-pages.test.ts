import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { upload, wavFile } from '../media/fixtures.ts';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import { asKey } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import { browser, setPassword } from './web-client.ts';

const PASSWORD = 'message pages passphrase';
const LABELS = [
  'Sent',
  'Processed',
  'Delivered',
  'Opens',
  'Clicks',
  'Replies',
  'Spam reports',
  'Unsubscribes',
  'Deferred',
  'Dropped',
  'Bounces',
  'Hard bounces',
  'Soft bounces',
  'Failed',
];

/** The counters a report shows, by the API's name, as numbers. */
function shownCounters(html: string): Record<string, number> {
  return Object.fromEntries(
    [...html.matchAll(/<div data-counter="(\w+)"><dt>[^<]+<\/dt><dd>([\d,]+)<\/dd><\/div>/g)].map((m) => [
      m[1],
      Number(m[2]?.replaceAll(',', '')),
    ]),
  );
}

/** `/emails`, `/drops` and their reports, against the API's own answers. */
describe('the lists and reports of emails and drops', () => {
  let s: SendingApp;
  let agent: Actor;
  let lead: Actor;
  let stranger: Actor;
  let sent: { id: number };
  before(async () => {
    s = await startSendingApp();
    const teamId = await createTeam(s.t);
    agent = await createUser(s.t, 'User', teamId);
    lead = await createUser(s.t, 'Team Administrator', teamId);
    stranger = await createUser(s.t, 'User', await createTeam(s.t));
    for (const who of [agent, lead, stranger]) await setPassword(s.t, who.id, PASSWORD);
    await setPassword(s.t, s.owner, PASSWORD);
    const people = await audience(s, 3, (i) => (i === 0 ? { first_name: '<img src=x onerror=alert(1)>', last_name: '=cmd|calc' } : {}));
    sent = await createEmail(s, { subject: 'Spring market', status: 'Scheduled', recipients: toTag(people) });
    await waitForStatus(s, sent.id, ['Sent']);
  });
  after(() => s.close());

  async function signedIn(email: string) {
    const b = browser(s.t.app);
    assert.equal((await b.signIn(email, PASSWORD)).status, 303);
    return b;
  }
  const ownerEmail = async () => (await s.api.get(`/v3/users/${s.owner}`)).body.email as string;

  test('/emails: search, status filter and paging as the API has them; bad input is a 400', async () => {
    await createEmail(s, { subject: 'Draft <script>alert(1)</script>' });
    const b = await signedIn(await ownerEmail());
    const all = await b.get('/emails');
    assert.equal(all.status, 200);
    assert.match(all.html, new RegExp(`<a href="/emails/${sent.id}">Spring market</a>`));
    assert.match(all.html, /Draft &lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.doesNotMatch(all.html, /<script>alert/);
    const api = (await s.api.get(`/v3/users/${s.owner}/templated_emails?subject=Spring`)).body;
    const searched = await b.get('/emails?q=Spring&status=');
    assert.match(searched.html, new RegExp(`${api.meta.total} email`));
    assert.doesNotMatch(searched.html, /Draft/);
    const saved = await b.get('/emails?status=Saved');
    assert.match(saved.html, /Draft/);
    assert.doesNotMatch(saved.html, /Spring market/);
    assert.equal((await b.get('/emails?status=Nonsense')).status, 400);
    assert.equal((await b.get('/emails?page=0')).status, 400);
    assert.equal((await browser(s.t.app).get('/emails?q=x')).location, '/login?next=%2Femails%3Fq%3Dx');
  });

  test("the report: the fourteen counters are the API's reporting, the recipients the deliveries listing", async () => {
    const b = await signedIn(await ownerEmail());
    const page = await b.get(`/emails/${sent.id}`);
    assert.equal(page.status, 200);
    const api = (await s.api.get(`/v3/templated_emails/${sent.id}`)).body;
    const { date: _, ...reporting } = api.reporting;
    assert.deepEqual(shownCounters(page.html), reporting);
    assert.deepEqual(
      [...page.html.matchAll(/data-counter="\w+"><dt>([^<]+)<\/dt>/g)].map((m) => m[1]),
      LABELS,
    );
    assert.match(page.html, /<svg role="img" aria-label="Funnel: Sent 3, Delivered 0, Opens 0, Clicks 0, Replies 0"/);
    assert.match(page.html, /<svg role="img" aria-label="Timeline: sent, delivered and replies by hour since sending started"/);

    const deliveries = (await s.api.get(`/v3/templated_emails/${sent.id}/deliveries`)).body.data;
    const rows = [
      ...page.html.matchAll(/<tr>\s*<th scope="row">([^<]+)<\/th>\s*<td><a href="\/contacts\/\d+">[^<]*<\/a><\/td>\s*<td>([^<]+)<\/td>/g),
    ];
    assert.deepEqual(
      rows.map((m) => [m[1], m[2]]),
      deliveries.map((d: any) => [d.address, 'Sent']),
    );
    assert.match(page.html, /&lt;img src=x onerror=alert\(1\)&gt;/, 'a hostile name is text');
    assert.doesNotMatch(page.html, /<img src=x/);
    assert.match(
      page.html,
      new RegExp(`<iframe class="preview-frame" title="The email as sent" sandbox src="/emails/${sent.id}/preview">`),
    );

    // Keys, not offsets: after the first delivery come the others; a state with none shows none.
    const rest = await b.get(`/emails/${sent.id}?after=${deliveries[0].id}`);
    assert.equal([...rest.html.matchAll(/<td><a href="\/contacts\/\d+">/g)].length, 2);
    assert.match((await b.get(`/emails/${sent.id}?state=bounced`)).html, /No recipient in this state\./);
    assert.equal((await b.get(`/emails/${sent.id}?state=lost`)).status, 400);

    const csv = await b.get(`/emails/${sent.id}/recipients.csv`);
    assert.equal(csv.status, 200);
    assert.match(String(csv.headers['content-type']), /^text\/csv/);
    const lines = csv.html.trim().split('\r\n');
    assert.equal(lines[0], 'address,name,state,outcome,last event');
    assert.deepEqual(
      lines.slice(1).map((line) => line.split(',')[0]),
      deliveries.map((d: any) => d.address),
    );
    assert.ok(
      lines.some((line) => line.includes(',<img src=x onerror=alert(1)> =cmd|calc,')),
      'a name that would be a formula stays as it is when it does not start one',
    );

    const preview = await b.get(`/emails/${sent.id}/preview`);
    assert.equal(preview.status, 200);
    assert.match(String(preview.headers['content-security-policy']), /^sandbox; default-src 'none'/);
    assert.match(preview.html, /Have you thought about the market this spring/);
  });

  test("another team's User gets 403 on every page of the email, a missing id 404; the agent's Team Administrator sees the agent's", async () => {
    const mine = await asKey(s.t.app, agent.key).post(`/v3/users/${agent.id}/templated_emails`, {
      subject: 'Agent email',
      body: '<p>Hi</p>',
    });
    assert.equal(mine.status, 201, mine.raw);
    const paths = (id: number) => [`/emails/${id}`, `/emails/${id}/recipients.csv`, `/emails/${id}/preview`];
    const outsider = await signedIn(stranger.email);
    for (const path of paths(mine.body.id)) assert.equal((await outsider.get(path)).status, 403, path);
    for (const path of paths(99_999_999)) assert.equal((await outsider.get(path)).status, 404, path);
    assert.equal((await outsider.get(`/drops/${mine.body.id}`)).status, 404, 'not a drop');
    const teamLead = await signedIn(lead.email);
    for (const path of paths(mine.body.id)) assert.equal((await teamLead.get(path)).status, 200, path);
    assert.equal((await (await signedIn(agent.email)).get(`/emails/${sent.id}`)).status, 403, "the agent may not see the Administrator's");
  });

  test('/drops and a drop report: counters, the audio player, and the same access rule', async () => {
    const media = await upload(s.t.app, agent.key, agent.id, 'listing.wav', wavFile(6));
    const made = await asKey(s.t.app, agent.key).post(`/v3/users/${agent.id}/voicemail_drops`, {
      provider: 'Sandbox',
      media_id: media.id,
      callback_number: '2025550143',
      name: 'Open house <b>drop</b>',
    });
    assert.equal(made.status, 201, made.raw);
    const b = await signedIn(agent.email);
    const list = await b.get('/drops');
    assert.match(list.html, new RegExp(`<a href="/drops/${made.body.id}">Open house &lt;b&gt;drop&lt;/b&gt;</a>`));
    const report = await b.get(`/drops/${made.body.id}`);
    assert.equal(report.status, 200);
    const { date: _, ...reporting } = made.body.reporting;
    assert.deepEqual(shownCounters(report.html), reporting);
    const src = /<audio controls preload="none" src="([^"]+)"/.exec(report.html)?.[1];
    assert.ok(src?.startsWith('/media/'), String(src));
    assert.equal((await b.get(src as string)).status, 200, 'the player plays what Hopper serves');
    assert.equal((await (await signedIn(stranger.email)).get(`/drops/${made.body.id}`)).status, 403);
  });
});
