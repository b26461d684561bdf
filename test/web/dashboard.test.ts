import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pauseSending } from '../../src/identity/users.ts';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import { asKey } from '../support/client.ts';
import { type DnsServer, startDnsServer } from '../support/dns-server.ts';
import { createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
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

/**
 * The dashboard's sender health: the last DNS check of the domain the user sends from, asked of a
 * real DNS server on loopback (DNS_SERVERS), and a brake's pause with what to do.
 */
describe('the dashboard’s sender health', () => {
  let t: TestApp;
  let dns: DnsServer;
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'hopper-sender-health-'));
    const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    await writeFile(join(dir, 'dkim.pem'), key);
    // SPF right, no DKIM record, a DMARC policy.
    dns = await startDnsServer({
      'homes.test': { TXT: ['v=spf1 include:sendgrid.net -all'] },
      '_dmarc.homes.test': { TXT: ['v=DMARC1; p=quarantine; rua=mailto:d@homes.test'] },
    });
    t = await startTestApp({
      env: {
        DNS_SERVERS: dns.address,
        SMTP_RELAY: 'sendgrid',
        SENDER_DOMAINS: 'homes.test',
        DKIM_DOMAIN: 'homes.test',
        DKIM_SELECTOR: 'hop1',
        DKIM_PRIVATE_KEY_FILE: join(dir, 'dkim.pem'),
      },
    });
  });
  after(async () => {
    await t.close();
    await dns.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('the sender domain’s SPF, DKIM and DMARC in words with what to publish; a paused sender told why and what to do', async () => {
    const agent = await createUser(t, 'User', await createTeam(t));
    await setPassword(t, agent.id, PASSWORD);
    const api = asKey(t.app, agent.key);
    assert.equal((await api.put(`/v3/users/${agent.id}`, { sender_email: 'jane@homes.test' })).status, 200);
    const b = browser(t.app);
    await b.signIn(agent.email, PASSWORD);

    const checked = await api.get('/v3/domains/homes.test/check');
    assert.equal(checked.status, 200, checked.raw);
    const page = await b.get('/');
    const health = /<section class="card" aria-labelledby="health-heading"[\s\S]*?<\/section>/.exec(page.html)?.[0] ?? '';
    assert.match(health, /Sending: on\./);
    assert.match(health, /<strong>homes\.test<\/strong>, the domain your emails go out from, as last checked/);
    assert.match(health, /<dt>SPF<\/dt>\s*<dd><strong>Set up\.<\/strong> One SPF record\./);
    const dkim = checked.body.records.find((r: { type: string }) => r.type === 'dkim');
    assert.equal(dkim.status, 'missing');
    assert.match(
      health,
      new RegExp(
        `<dt>DKIM</dt>\\s*<dd><strong>Missing\\.</strong>[^<]*Publish at <code>hop1\\._domainkey\\.homes\\.test</code>: <code>${dkim.expected.replace(/[+/.]/g, '\\$&')}</code>`,
      ),
    );
    assert.match(health, /<dt>DMARC<\/dt>\s*<dd><strong>Set up\.<\/strong> DMARC policy quarantine/);
    assert.match(health, /What to do: publish what is missing or wrong/);
    assert.doesNotMatch(page.html, /data-sending-paused/);

    // A brake pauses the agent (the engine's own call): the dashboard says why and what to do.
    await pauseSending(t.database.db, agent.id, { reason: 'complaint_rate', complaintRate: 0.006667, hardBounceRate: 0 }, new Date());
    const paused = await b.get('/');
    assert.match(
      paused.html,
      /data-sending-paused>\s*<p><strong>Your sending is paused<\/strong> since .+?: spam complaints reached 0\.67 % of the emails delivered over the last 30 days, over the 0\.3 % limit\./,
    );
    assert.match(paused.html, /What to do: Mail only the people who asked/);
    assert.equal((await asKey(t.app, t.adminKey).post(`/v3/users/${agent.id}/sending/resume`)).status, 200);
    assert.doesNotMatch((await b.get('/')).html, /data-sending-paused/, 'resumed: no longer paused');

    // Another user's domain, never checked: said so, with how to check it.
    const other = await createUser(t, 'User', await createTeam(t));
    await setPassword(t, other.id, PASSWORD);
    const ob = browser(t.app);
    await ob.signIn(other.email, PASSWORD);
    assert.match(
      (await ob.get('/')).html,
      /The DNS records of <strong>hopper\.test<\/strong>, the domain your emails go out from, have not been checked yet/,
    );
  });
});
