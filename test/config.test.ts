import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { generateApiKey } from '../src/api-key-format.ts';
import { ConfigError, loadConfig, parseDuration } from '../src/config.ts';

describe('configuration', () => {
  test("defaults follow the README's configuration table and the result is frozen", () => {
    const config = loadConfig({});
    assert.equal(config.port, 8443);
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.publicUrl, 'https://localhost:8443');
    assert.equal(config.gracePeriodMs, 14 * 86_400_000);
    assert.equal(config.role, 'all');
    assert.equal(config.trustProxy, false);
    assert.equal(config.mailFrom, 'Hopper <no-reply@localhost>');
    assert.ok(config.dataDir.endsWith('/data'));
    assert.ok(Object.isFrozen(config));
    assert.throws(() => {
      (config as { port: number }).port = 1;
    });
  });

  test('durations: 30s, 15m, 2h, 14d', () => {
    assert.equal(parseDuration('30s'), 30_000);
    assert.equal(parseDuration('15m'), 900_000);
    assert.equal(parseDuration('2h'), 7_200_000);
    assert.equal(parseDuration('14d'), 1_209_600_000);
    for (const bad of ['', '5', '1w', '-1s', '1.5h', 'soon']) assert.equal(parseDuration(bad), undefined, bad);
  });

  test('JOB_SUPERVISE_INTERVAL: a minute by default, from 1s to 1h', () => {
    assert.equal(loadConfig({}).jobSuperviseIntervalMs, 60_000);
    assert.equal(loadConfig({ JOB_SUPERVISE_INTERVAL: '10s' }).jobSuperviseIntervalMs, 10_000);
    for (const bad of ['500ms', '2h', 'often']) {
      assert.throws(() => loadConfig({ JOB_SUPERVISE_INTERVAL: bad }), /JOB_SUPERVISE_INTERVAL must/, bad);
    }
  });

  test('every invalid variable is reported at once, named, with the accepted form', () => {
    const error = (() => {
      try {
        loadConfig({
          PORT: 'eighty',
          GRACE_PERIOD: 'forever',
          ROLE: 'boss',
          TRUST_PROXY: 'maybe',
          PUBLIC_URL: 'ftp://x',
          BOOTSTRAP_ADMIN_KEY: 'hop_nope',
          TLS_CERT_FILE: '/tmp/cert.pem',
          DATABASE_URL: 'mysql://x',
        });
      } catch (e) {
        return e as Error;
      }
    })();
    assert.ok(error instanceof ConfigError);
    for (const name of [
      'PORT',
      'GRACE_PERIOD',
      'ROLE',
      'TRUST_PROXY',
      'PUBLIC_URL',
      'BOOTSTRAP_ADMIN_KEY',
      'TLS_CERT_FILE',
      'DATABASE_URL',
    ]) {
      assert.match(error.message, new RegExp(name), name);
    }
    assert.match(error.message, /30s, 15m, 2h or 14d/);
  });

  test('ROLE=api or worker needs DATABASE_URL (PGlite is one process)', () => {
    assert.throws(() => loadConfig({ ROLE: 'worker' }), /ROLE=worker needs DATABASE_URL/);
    assert.equal(loadConfig({ ROLE: 'api', DATABASE_URL: 'postgres://localhost/x' }).role, 'api');
  });

  test('a well-formed BOOTSTRAP_ADMIN_KEY is accepted; PUBLIC_URL loses its trailing slash', () => {
    const key = generateApiKey();
    const config = loadConfig({ BOOTSTRAP_ADMIN_KEY: key, PUBLIC_URL: 'https://hopper.example.com/' });
    assert.equal(config.bootstrapAdminKey, key);
    assert.equal(config.publicUrl, 'https://hopper.example.com');
  });

  test('email settings: sender domains, inbound receiver, Postmark credentials, checked together', () => {
    const config = loadConfig({
      SENDER_DOMAINS: 'Agents.example, realty.example',
      INBOUND_DOMAIN: 'In.Hopper.example',
      HOST: '0.0.0.0',
      MAIL_POSTAL_ADDRESS: '1 Main St\\nSpringfield',
    });
    assert.deepEqual(config.senderDomains, ['agents.example', 'realty.example']);
    assert.deepEqual(config.inbound, {
      domain: 'in.hopper.example',
      host: '0.0.0.0',
      port: 2525,
      maxBytes: 10 * 1024 * 1024,
      forwardsPerDay: 20,
      feedbackLoops: ['staff@hotmail.com', 'feedback@arf.mail.yahoo.com', 'scomp@aol.net', 'amazonses.com'],
    });
    const loops = (value: string) => loadConfig({ INBOUND_DOMAIN: 'in.example', INBOUND_FEEDBACK_LOOPS: value }).inbound?.feedbackLoops;
    assert.deepEqual(loops('FBL@Loop.example, feedback.example'), ['fbl@loop.example', 'feedback.example']);
    assert.deepEqual(loops('none'), []);
    assert.throws(() => loops('not a loop'), /INBOUND_FEEDBACK_LOOPS must list addresses or domain names/);
    assert.throws(() => loops('@loop.example'), /INBOUND_FEEDBACK_LOOPS/);
    assert.equal(config.mailPostalAddress, '1 Main St\nSpringfield');
    assert.equal(config.trackOpens, false, 'no open pixel by default (docs/decisions.md)');
    assert.equal(config.smtpRelay, 'other');
    const relayOf = (env: Record<string, string>) =>
      loadConfig({ PUBLIC_URL: 'https://h.example', MAIL_FROM: 'a@h.example', ...env }).smtpRelay;
    assert.equal(relayOf({ SMTP_URL: 'smtp://apikey:x@smtp.sendgrid.net:587' }), 'sendgrid');
    assert.equal(relayOf({ SMTP_URL: 'smtp://u:p@smtp.postmarkapp.com:587' }), 'postmark');
    assert.equal(relayOf({ SMTP_URL: 'smtps://u:p@email-smtp.eu-west-1.amazonaws.com:465' }), 'ses');
    assert.equal(relayOf({ SMTP_URL: 'smtp://relay.example:25' }), 'other');
    assert.equal(relayOf({ SMTP_URL: 'smtp://relay.example:25', SMTP_RELAY: 'SendGrid' }), 'sendgrid');
    assert.throws(() => relayOf({ SMTP_RELAY: 'mailgun' }), /SMTP_RELAY must be one of sendgrid, postmark, ses, other/);
    assert.throws(() => loadConfig({ INBOUND_DOMAIN: 'in.example', INBOUND_DNS_SERVERS: 'not a server' }), /INBOUND_DNS_SERVERS/);
    assert.deepEqual(loadConfig({ INBOUND_DNS_SERVERS: '127.0.0.1:5353, ::1' }).dnsServers, ['127.0.0.1:5353', '::1']);
    assert.throws(() => loadConfig({ DNS_SERVERS: 'not a server' }), /DNS_SERVERS must list DNS server addresses/);
    assert.deepEqual(
      loadConfig({ DNS_SERVERS: '[::1]:5353', INBOUND_DNS_SERVERS: '127.0.0.1' }).dnsServers,
      ['[::1]:5353'],
      'the new name wins',
    );
    assert.deepEqual(loadConfig({}).dnsServers, []);
    assert.deepEqual(loadConfig({}).brakes, { complaintRate: 0.003, hardBounceRate: 0.05, minimumSent: 100, windowMs: 30 * 86_400_000 });
    assert.equal(loadConfig({ BRAKE_COMPLAINT_RATE: '0.5%', BRAKE_HARD_BOUNCE_RATE: '2' }).brakes.complaintRate, 0.005);
    assert.throws(() => loadConfig({ BRAKE_COMPLAINT_RATE: 'high' }), /BRAKE_COMPLAINT_RATE must be a percentage from 0 to 100/);
    assert.throws(() => loadConfig({ BRAKE_HARD_BOUNCE_RATE: '150' }), /BRAKE_HARD_BOUNCE_RATE/);
    assert.equal(loadConfig({}).inbound, undefined);
    assert.throws(
      () =>
        loadConfig({
          SENDER_DOMAINS: 'not a domain',
          INBOUND_DOMAIN: 'x..y',
          INBOUND_SMTP_PORT: '99999',
          POSTMARK_WEBHOOK_USER: 'pm',
          TRACK_OPENS: 'maybe',
        }),
      (error: Error) =>
        error instanceof ConfigError &&
        [
          'SENDER_DOMAINS',
          'INBOUND_DOMAIN',
          'INBOUND_SMTP_PORT',
          'POSTMARK_WEBHOOK_USER and POSTMARK_WEBHOOK_PASSWORD',
          'TRACK_OPENS',
        ].every((name) => error.message.includes(name)),
    );
  });

  test('with SMTP_URL set, PUBLIC_URL or MAIL_FROM at localhost or a loopback address is refused, naming them', () => {
    const problem = (env: Record<string, string>) => {
      try {
        loadConfig({ SMTP_URL: 'smtp://relay.example:587', ...env });
        return '';
      } catch (error) {
        assert.ok(error instanceof ConfigError);
        return error.message;
      }
    };
    // The defaults: both at localhost.
    const both = problem({});
    assert.match(both, /SMTP_URL is set/);
    assert.match(both, /PUBLIC_URL \(https:\/\/localhost:8443, the default\) and MAIL_FROM \(Hopper <no-reply@localhost>, the default\)/);
    const good = { PUBLIC_URL: 'https://hopper.example.com', MAIL_FROM: 'Hopper <mail@example.com>' };
    assert.equal(problem(good), '');
    for (const publicUrl of [
      'https://127.0.0.1:8443',
      'http://[::1]:8080',
      'https://app.localhost',
      'https://127.1.2.3',
      'https://0.0.0.0',
    ]) {
      assert.match(problem({ ...good, PUBLIC_URL: publicUrl }), /PUBLIC_URL \(/, publicUrl);
    }
    for (const mailFrom of ['no-reply@localhost', 'Jane <jane@127.0.0.1>', 'Ops <ops@[127.0.0.1]>', 'a@LOCALHOST.']) {
      const message = problem({ ...good, MAIL_FROM: mailFrom });
      assert.match(message, /MAIL_FROM \(/, mailFrom);
      assert.doesNotMatch(message, /PUBLIC_URL \(/, mailFrom);
    }
    // Without SMTP_URL (the outbox), the localhost defaults are fine for trying Hopper out.
    assert.doesNotThrow(() => loadConfig({}));
    // Names that merely contain "localhost" are real hosts.
    assert.equal(problem({ PUBLIC_URL: 'https://localhost-realty.com', MAIL_FROM: 'a@mylocalhost.example' }), '');
  });
});

describe('one bad value, one problem', () => {
  /** Every variable of the README's configuration table. */
  const README_VARIABLES = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...(line.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1] as string));

  test('a value no variable accepts is reported once, against that variable alone (PORT=abc does not blame PUBLIC_URL)', () => {
    assert.ok(README_VARIABLES.length > 60, `the table was read: ${README_VARIABLES.length} variables`);
    for (const name of README_VARIABLES) {
      for (const value of ['abc', '-1']) {
        let problems: string[] = [];
        try {
          loadConfig({ [name]: value });
        } catch (error) {
          assert.ok(error instanceof ConfigError, `${name}=${value}: ${String(error)}`);
          problems = error.message.split('\n  - ').slice(1);
        }
        assert.ok(problems.length <= 1, `${name}=${value} is one problem, not ${problems.length}:\n${problems.join('\n')}`);
        for (const problem of problems) assert.match(problem, new RegExp(`\\b${name}\\b`), `${name}=${value} is blamed on ${name}`);
      }
    }
  });
});
