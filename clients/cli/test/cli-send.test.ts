import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { upload, wavFile } from '../../../test/media/fixtures.ts';
import { TEST_POSTAL_ADDRESS } from '../../../test/sending/support/sending-app.ts';
import { type SmtpSink, startSmtpSink } from '../../../test/sending/support/smtp-sink.ts';
import { startTestApp, type TestApp } from '../../../test/support/test-app.ts';
import { createHopper, type Hopper, retrying, unwrap } from '../../typescript/src/index.ts';

const BIN = join(import.meta.dirname, '..', 'bin', 'hopper.ts');
const PACKAGE = join(import.meta.dirname, '..', 'package.json');
const GOOGLE = join(import.meta.dirname, '..', '..', '..', 'test', 'fixtures', 'contacts', 'google-contacts.csv');
const WINDOWS_1252 = join(import.meta.dirname, '..', '..', '..', 'test', 'fixtures', 'contacts', 'windows-1252.csv');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `hopper` as a child process, as a user runs it, with standard input if given. */
function hopper(args: string[], env: Record<string, string | undefined>, stdin?: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH, ...env } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
    child.stdin?.end(stdin ?? '');
  });
}

/**
 * The CLI an assistant uses: configured once (a profile in a 0600 file), it imports an export,
 * creates and sends an email that reaches a real SMTP server, watches its counters, lifts a
 * suppression, and says at once when the server is not there.
 */
describe('hopper: configure, create, send, watch, lift', () => {
  let t: TestApp;
  let sink: SmtpSink;
  let url: string;
  let scratch: string;
  /** No HOPPER_URL or HOPPER_KEY: everything comes from the profile. */
  let env: Record<string, string>;
  let client: Hopper;

  before(async () => {
    sink = await startSmtpSink();
    t = await startTestApp({ workers: true, env: { SMTP_URL: sink.url, MAIL_POSTAL_ADDRESS: TEST_POSTAL_ADDRESS } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    client = createHopper({ url, key: t.adminKey });
    scratch = await mkdtemp(join(tmpdir(), 'hopper-cli-send-'));
    env = { XDG_CONFIG_HOME: join(scratch, 'config'), HOME: scratch };
  });
  after(async () => {
    await t.close();
    await sink.close();
    await rm(scratch, { recursive: true, force: true });
  });

  test('--version prints the package version', async () => {
    const run = await hopper(['--version'], env);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, `hopper ${JSON.parse(await readFile(PACKAGE, 'utf8')).version}\n`);
  });

  test('configure keeps a profile in a 0600 file, the key read from stdin; commands then need no environment', async () => {
    const unconfigured = await hopper(['emails', 'list'], env);
    assert.equal(unconfigured.code, 2);
    assert.match(unconfigured.stderr, /^hopper: Say which server and key to use: hopper configure --url /);

    const run = await hopper(['configure', '--url', `${url}/`, '--key', '-', '--user', String(t.adminId)], env, `${t.adminKey}\n`);
    assert.equal(run.code, 0, run.stderr);
    const file = join(scratch, 'config', 'hopper', 'config.json');
    assert.match(run.stdout, new RegExp(`^Saved profile default \\(${url}, key hop_\\S{4}…\\) in ${file}, readable by you only\\.\\n`));
    assert.match(run.stdout, /The key works: it reaches \d+ users?\.\n$/);
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.equal((await stat(join(scratch, 'config', 'hopper'))).mode & 0o777, 0o700);
    const saved = JSON.parse(await readFile(file, 'utf8'));
    assert.deepEqual(saved, { default_profile: 'default', profiles: { default: { url, key: t.adminKey, user: t.adminId } } });

    const listed = await hopper(['configure'], env);
    assert.equal(listed.code, 0, listed.stderr);
    assert.ok(!listed.stdout.includes(t.adminKey), 'the key is never printed whole');
    assert.match(listed.stdout, new RegExp(`\\* default: ${url}, key hop_\\S{4}…, user ${t.adminId}\\n`));

    const list = await hopper(['emails', 'list'], env);
    assert.equal(list.code, 0, list.stderr);

    const wrong = await hopper(['configure', '--profile', 'typo', '--url', url, '--key', 'hop_not_a_key'], env);
    assert.equal(wrong.code, 1, 'saved, and the check says the key does not work');
    assert.match(wrong.stderr, /\(401\)/);
    const missing = await hopper(['--profile', 'nope', 'emails', 'list'], env);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /There is no profile "nope" in .* \(there is default, typo\)/);
    const notKey = await hopper(['configure', '--key', 'abc'], env);
    assert.equal(notKey.code, 2);
    assert.match(notKey.stderr, /An API key starts with hop_/);
  });

  test('imports an export, creates an email to a tag and sends it; watch follows it to Sent; it reaches the SMTP server', {
    timeout: 60_000,
  }, async () => {
    const imported = await hopper(['contacts', 'import', GOOGLE, '--tag', 'CLI send', '--errors', join(scratch, 'refused.csv')], env);
    assert.equal(imported.code, 0, imported.stderr);
    assert.match(imported.stdout, /: 4 rows, 3 created, 0 updated, 1 refused\n/);
    assert.match(
      imported.stdout,
      /\nRead as utf-8, separated by commas: First Name → first_name, Last Name → last_name, Labels → tags, E-mail 1 - Value → email, /,
    );
    const ansi = await hopper(['contacts', 'import', WINDOWS_1252, '--tag', 'CLI send'], env);
    assert.equal(ansi.code, 0, ansi.stderr);
    assert.match(ansi.stdout, /: 3 rows, 3 created, 0 updated, 0 refused\nRead as windows-1252, separated by commas: /);

    const created = await hopper(
      [
        'emails',
        'create',
        '--subject',
        'Spring open house',
        '--body',
        '<p>Hello {{first_name}}, come and see.</p>',
        '--tag',
        'cli SEND',
        '--send',
      ],
      env,
    );
    assert.equal(created.code, 0, created.stderr);
    const [, id] =
      /^Templated email (\d+) created \((?:Scheduled|Sending|Sent)\): follow it with: hopper watch email \1\.\n$/.exec(created.stdout) ??
      [];
    assert.ok(id, created.stdout);

    const watched = await hopper(['watch', 'email', id, '--interval', '0.2', '--timeout', '45'], env);
    assert.equal(watched.code, 0, watched.stderr);
    const lines = watched.stdout.trim().split('\n');
    assert.match(
      lines.at(-1) ?? '',
      new RegExp(`^\\d\\d:\\d\\d:\\d\\d  Templated email ${id}: Sent, 5 deliveries; sent 5, delivered 0, bounce 0, failed 0$`),
    );

    // Five people with an address (Priya has only a phone): each got the email, greeted by name.
    const to = (address: string) => sink.to(address).map((message) => message.raw.replace(/=\r?\n/g, ''));
    assert.equal(sink.messages.length, 5);
    assert.match(to('maria.gonzalez@gmail.example')[0] ?? '', /Hello Maria, come and see\./);
    assert.match(to('juergen.mueller@beispiel.example')[0] ?? '', /Subject: Spring open house/);

    const json = await hopper(['watch', 'email', id, '--json'], env);
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual(JSON.parse(json.stdout).counters.sent, 5);

    const noTag = await hopper(['emails', 'create', '--subject', 'x', '--body', 'x', '--tag', 'Nobody'], env);
    assert.equal(noTag.code, 1);
    assert.match(noTag.stderr, /^hopper: User \d+ has no tag named "Nobody"\.\n$/);
    const noOne = await hopper(['emails', 'create', '--subject', 'x', '--body', 'x'], env);
    assert.equal(noOne.code, 2);
    assert.match(noOne.stderr, /Name who receives it: --tag NAME, --tag-id ID or --contact ID/);
    const both = await hopper(
      ['emails', 'create', '--subject', 'x', '--body', 'x', '--contact', '1', '--send', '--at', '2099-01-01T00:00:00Z'],
      env,
    );
    assert.equal(both.code, 2);
    assert.match(both.stderr, /Say --send \(now\) or --at TIME \(later\), not both\./);
  });

  test('drops create: the audio, the caller id, the provider, to a tag; the audio too short said in a sentence', async () => {
    const media = await upload(t.app, t.adminKey, t.adminId, 'open-house.wav', wavFile(6));
    const short = await upload(t.app, t.adminKey, t.adminId, 'short.wav', wavFile(2));
    const args = [
      'drops',
      'create',
      '--name',
      'Open house',
      '--callback-number',
      '(727) 232-9117',
      '--provider',
      'Sandbox',
      '--tag',
      'CLI send',
    ];
    const created = await hopper([...args, '--media', String(media.id), '--at', '2099-01-01T15:00:00Z'], env);
    assert.equal(created.code, 0, created.stderr);
    const [, id] =
      /^Voicemail drop (\d+) created \(Scheduled\): scheduled for 2099-01-01T15:00:00Z; follow it with: hopper watch drop \1\.\n$/.exec(
        created.stdout,
      ) ?? [];
    assert.ok(id, created.stdout);
    const drop = await unwrap(client.api.GET('/v3/voicemail_drops/{id}', { params: { path: { id: Number(id) } } }));
    assert.equal(drop.media_id, media.id);
    assert.equal(drop.provider, 'Sandbox');
    assert.deepEqual(
      drop.recipients.map((r) => r.label),
      ['CLI send'],
    );
    const refused = await hopper([...args, '--media', String(short.id)], env);
    assert.equal(refused.code, 1);
    assert.equal(
      refused.stderr,
      `hopper: Invalid request (400): The media_id field must name audio longer than 5 seconds, as providers refuse shorter audio (media ${short.id} is 2 s long).\n` +
        `  media_id: must name audio longer than 5 seconds, as providers refuse shorter audio (media ${short.id} is 2 s long)\n`,
    );
    const noProvider = await hopper(['drops', 'create', '--name', 'x', '--media', '1', '--callback-number', '1', '--contact', '1'], env);
    assert.equal(noProvider.code, 2);
    assert.match(noProvider.stderr, /required option '--provider <name>' not specified/);
  });

  test('a draft from stdin, watched: watch says nothing sends a draft', async () => {
    const tag = await unwrap(
      client.api.POST('/v3/users/{user_id}/tags', { params: { path: { user_id: t.adminId } }, body: { name: 'Draft' } }),
    );
    const created = await hopper(
      ['emails', 'create', '--subject', 'Later', '--body-file', '-', '--tag-id', String(tag.id), '--json'],
      env,
      '<p>From stdin</p>',
    );
    assert.equal(created.code, 0, created.stderr);
    const email = JSON.parse(created.stdout);
    assert.equal(email.status, 'Saved');
    assert.equal(email.body, '<p>From stdin</p>');
    const watched = await hopper(['watch', 'email', String(email.id)], env);
    assert.equal(watched.code, 1);
    assert.match(watched.stderr, new RegExp(`is a draft \\(Saved\\): nothing sends it until you do \\(hopper emails send ${email.id}\\)`));
  });

  test('suppressions lift: a hard bounce receives again; an unsubscribe is never lifted', async () => {
    const bounced = await unwrap(
      client.api.POST('/v3/users/{user_id}/contacts', {
        params: { path: { user_id: t.adminId } },
        body: { email: 'bounced@lift.example', status: 'Inactive - Hard Bounce' },
      }),
    );
    const run = await hopper(
      ['suppressions', 'lift', '--channel', 'email', '--reason', 'hard_bounce', '--contact', String(bounced.id)],
      env,
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, `Lifted 1 suppressed email address of user ${t.adminId}: it receives again.\n`);
    const after = await unwrap(client.api.GET('/v3/contacts/{id}', { params: { path: { id: bounced.id } } }));
    assert.equal(after.status, 'Subscribed');
    const again = await hopper(['suppressions', 'lift', '--channel', 'email', '--contact', String(bounced.id)], env);
    assert.equal(again.stdout, 'No suppressed email addresses matched: nothing lifted.\n');
    const refused = await hopper(['suppressions', 'lift', '--channel', 'email', '--reason', 'unsubscribe'], env);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^hopper: Invalid request \(400\): .*\n {2}reasons: may name only hard_bounce/);
    const noChannel = await hopper(['suppressions', 'lift'], env);
    assert.equal(noChannel.code, 2);
  });

  test('a server that is not there: one clear sentence, no retries', async () => {
    // A port nothing listens on: taken from the system, then let go.
    const probe = createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => probe.once('listening', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const run = await hopper(['drops', 'list', '--user', '1'], { ...env, HOPPER_URL: `http://127.0.0.1:${port}`, HOPPER_KEY: 'hop_x' });
    assert.equal(run.code, 1);
    assert.equal(
      run.stderr,
      `hopper: Cannot reach http://127.0.0.1:${port} (from HOPPER_URL): nothing answers there (connection refused). Is Hopper running, and is that its address and port?\n`,
    );
  });

  test('the client does not try again where nothing listens, and does where a connection dropped', async () => {
    const failing = (code: string) => {
      let calls = 0;
      const fetch = async () => {
        calls++;
        throw Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error(code), { code }) });
      };
      return { fetch: retrying(fetch, 3, 1), calls: () => calls };
    };
    const refused = failing('ECONNREFUSED');
    await assert.rejects(refused.fetch(new Request('http://127.0.0.1:1/v3/users')), /fetch failed/);
    assert.equal(refused.calls(), 1);
    const dropped = failing('ECONNRESET');
    await assert.rejects(dropped.fetch(new Request('http://127.0.0.1:1/v3/users')), /fetch failed/);
    assert.equal(dropped.calls(), 3);
  });
});
