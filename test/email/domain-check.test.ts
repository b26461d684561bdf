import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { main as cli } from '../../clients/cli/src/program.ts';
import { latestDomainCheck } from '../../src/email/domain-watch.ts';
import { asKey } from '../support/client.ts';
import { type DnsServer, startDnsServer } from '../support/dns-server.ts';
import { assertProblem, createUser, TIMESTAMP } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * GET /v3/domains/{domain}/check against a real DNS server on loopback (DNS_SERVERS), as the
 * issue's "done when" sets it up: agents.test's SPF right, its DKIM record holding another key,
 * no DMARC record. The start-up check of DKIM_DOMAIN logs the wrong key at warn.
 */
function rsaKey() {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    pem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    record: `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`,
  };
}

const ours = rsaKey();
const another = rsaKey();

const records = (check: { records: { type: string }[] }) =>
  Object.fromEntries(check.records.map((r) => [r.type, r])) as Record<string, any>;

describe('GET /v3/domains/{domain}/check', () => {
  let t: TestApp;
  let dns: DnsServer;
  let dir: string;
  const logLines: string[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'hopper-domain-check-'));
    await writeFile(join(dir, 'dkim.pem'), ours.pem);
    dns = await startDnsServer({
      'agents.test': { TXT: ['v=spf1 include:sendgrid.net -all', 'google-site-verification=abc'] },
      // A long key record comes as several strings of at most 255 characters, joined by the receiver.
      'hop1._domainkey.agents.test': { TXT: [[another.record.slice(0, 200), another.record.slice(200)]] },
      'in.agents.test': { TXT: ['v=spf1 include:sendgrid.net -all'], MX: [{ preference: 10, exchange: 'hopper.test' }] },
      'two.test': { TXT: ['v=spf1 -all', 'v=spf1 include:sendgrid.net -all'] },
      '_dmarc.two.test': { TXT: ['v=DMARC1; p=reject; rua=mailto:d@two.test'] },
    });
    const logStream = new PassThrough();
    logStream.on('data', (chunk) => logLines.push(String(chunk)));
    t = await startTestApp({
      logStream,
      env: {
        LOG_LEVEL: 'warn',
        DNS_SERVERS: dns.address,
        SMTP_RELAY: 'sendgrid',
        DKIM_DOMAIN: 'agents.test',
        DKIM_SELECTOR: 'hop1',
        DKIM_PRIVATE_KEY_FILE: join(dir, 'dkim.pem'),
        INBOUND_DOMAIN: 'in.agents.test',
      },
    });
  });
  after(async () => {
    await t.close();
    await dns.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('SPF ok, DKIM wrong with the exact record to publish, DMARC missing; MX and Return-Path ok', async () => {
    const reply = await asKey(t.app, t.adminKey).get('/v3/domains/Agents.Test/check');
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.body.domain, 'agents.test');
    assert.match(reply.body.checked_at, TIMESTAMP);
    const byType = records(reply.body);
    assert.deepEqual(Object.keys(byType), ['spf', 'dkim', 'dmarc', 'mx', 'return_path']);
    assert.equal(byType.spf.status, 'ok');
    assert.deepEqual(byType.spf.found, ['v=spf1 include:sendgrid.net -all']);
    assert.equal(byType.dkim.status, 'wrong', byType.dkim.detail);
    assert.equal(byType.dkim.name, 'hop1._domainkey.agents.test');
    assert.equal(byType.dkim.expected, ours.record, 'the exact TXT value of the configured key');
    assert.deepEqual(byType.dkim.found, [another.record]);
    assert.match(byType.dkim.detail, /another key/);
    assert.equal(byType.dmarc.status, 'missing');
    assert.equal(byType.dmarc.name, '_dmarc.agents.test');
    assert.match(byType.dmarc.expected, /^v=DMARC1; p=none; rua=mailto:/);
    assert.equal(byType.mx.status, 'ok');
    assert.deepEqual(byType.mx.found, ['10 hopper.test']);
    assert.equal(byType.return_path.status, 'ok');
    assert.equal(byType.return_path.name, 'in.agents.test');
    assert.ok(dns.asked.includes('TXT hop1._domainkey.agents.test'), 'asked the server of DNS_SERVERS');
  });

  test('once the right key is published, DKIM is ok; two SPF records are wrong (permerror); a DMARC policy is ok', async () => {
    dns.zone['hop1._domainkey.agents.test'] = { TXT: [ours.record] };
    const admin = asKey(t.app, t.adminKey);
    const fixed = records((await admin.get('/v3/domains/agents.test/check')).body);
    assert.equal(fixed.dkim.status, 'ok', fixed.dkim.detail);
    const two = await admin.get('/v3/domains/two.test/check');
    const byType = records(two.body);
    assert.equal(byType.spf.status, 'wrong');
    assert.match(byType.spf.detail, /permerror/);
    assert.equal(byType.dmarc.status, 'ok');
    assert.equal(byType.dkim.status, 'missing', 'Hopper signs nothing for two.test');
    dns.zone['hop1._domainkey.agents.test'] = { TXT: [[another.record.slice(0, 200), another.record.slice(200)]] };
  });

  test('a DNS server that fails says so rather than inventing an answer', async () => {
    const reply = await asKey(t.app, t.adminKey).get('/v3/domains/servfail.test/check');
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(records(reply.body).spf.status, 'missing');
    assert.match(records(reply.body).spf.detail, /did not answer/);
  });

  test('a user checks their own sender domain only; a malformed domain is a 400', async () => {
    const own = await createUser(t, 'User', null, { sender_email: 'jane@agents.test' });
    assert.equal((await asKey(t.app, own.key).get('/v3/domains/agents.test/check')).status, 200);
    assertProblem(await asKey(t.app, own.key).get('/v3/domains/two.test/check'), 403);
    assertProblem(await asKey(t.app, t.adminKey).get('/v3/domains/not_a_domain!/check'), 400);
    assertProblem(await asKey(t.app, undefined).get('/v3/domains/agents.test/check'), 401);
  });

  test('hopper domains check prints the same records as a table, the value to publish, and exits 1', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    const out = new PassThrough();
    let printed = '';
    out.on('data', (chunk) => {
      printed += String(chunk);
    });
    const io = { env: { HOPPER_URL: url, HOPPER_KEY: t.adminKey }, stdout: out, stderr: out };
    assert.equal(await cli(['node', 'hopper', 'domains', 'check', 'agents.test'], io), 1, printed);
    const rows = printed.split('\n');
    assert.match(rows[1] ?? '', /^RECORD\s+STATUS\s+NAME\s+DETAIL$/);
    assert.match(printed, /^spf\s+ok\s+agents\.test\s/m);
    assert.match(printed, /^dkim\s+wrong\s+hop1\._domainkey\.agents\.test\s/m);
    assert.match(printed, /^dmarc\s+missing\s+_dmarc\.agents\.test\s/m);
    assert.ok(printed.includes(`Publish for dkim at hop1._domainkey.agents.test:\n  ${ours.record}\n`), printed);
  });

  test('the start-up check logged the wrong DKIM key at warn, and keeps its result for the dashboard', async () => {
    const warning = () => logLines.map((line) => JSON.parse(line)).find((line) => line.dkim?.status === 'wrong');
    for (let i = 0; i < 100 && !warning(); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    const warned = warning();
    assert.ok(warned, logLines.join('\n'));
    assert.equal(warned.level, 40);
    assert.equal(warned.dkim.expected, ours.record);
    assert.equal(latestDomainCheck(t.config)?.domain, 'agents.test');
  });
});
