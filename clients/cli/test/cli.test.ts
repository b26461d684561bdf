import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../../../test/support/test-app.ts';
import { createHopper, type Hopper, unwrap } from '../../typescript/src/index.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const BIN = join(import.meta.dirname, '..', 'bin', 'hopper.ts');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `hopper` as a child process, as a user runs it. */
function hopper(args: string[], env: Record<string, string | undefined>, cwd?: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH, ...env }, cwd }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** The CLI against a live Hopper over HTTP, with the sending engine running. */
describe('hopper (the CLI)', () => {
  let t: TestApp;
  let env: Record<string, string>;
  let client: Hopper;
  let scratch: string;
  before(async () => {
    t = await startTestApp({ workers: true });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    env = { HOPPER_URL: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`, HOPPER_KEY: t.adminKey };
    client = createHopper({ url: env.HOPPER_URL as string, key: t.adminKey });
    scratch = await mkdtemp(join(tmpdir(), 'hopper-cli-'));
  });
  after(async () => {
    await t.close();
    await rm(scratch, { recursive: true, force: true });
  });

  test('imports 10,000 rows with 20 bad ones, refused by line; a second run creates nothing new', { timeout: 60_000 }, async () => {
    const lines = ['email,first_name,last_name,tags'];
    const bad = new Map<number, string>();
    for (let i = 1; i <= 10_000; i++) {
      const line = lines.length + 1;
      if (i % 500 === 250) {
        // Every 500th row has no usable email: 10 malformed addresses, 10 rows with neither email nor phone.
        bad.set(line, i % 1000 === 250 ? 'email' : '');
        lines.push(i % 1000 === 250 ? `not-an-email-${i},Bad,Row,` : `,No,Address,`);
      } else if (i === 7) {
        // A quoted cell with a comma and a newline: the row spans two lines of the file.
        lines.push(`person${i}@example.com,"Ann, ""the first""\nof her name",Lee,Imported;Spring`);
      } else {
        lines.push(`person${i}@example.com,First${i},Last${i},Imported;Spring`);
      }
    }
    // The lines after the two-line row are one further down the file.
    const expected = [...bad.keys()].map((line) => (line > 8 ? line + 1 : line));
    const file = join(scratch, 'contacts.csv');
    await writeFile(file, `${lines.join('\n')}\n`);

    const first = await hopper(['contacts', 'import', file, '--tag', 'CLI'], env);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /10000 rows, 9980 created, 0 updated, 20 refused/);
    assert.match(first.stdout, /contacts\.refused\.csv/);
    assert.equal(first.stderr, '', 'no progress bar when stderr is not a terminal');
    const refused = (await readFile(join(scratch, 'contacts.refused.csv'), 'utf8')).trim().split('\n');
    assert.equal(refused[0], 'line,field,reason');
    assert.deepEqual(
      [...new Set(refused.slice(1).map((row) => Number(row.split(',')[0])))],
      expected,
      'the line of each refused row in the file',
    );
    assert.match(refused[1] ?? '', /^252,email,/);

    const contacts = await unwrap(
      client.api.GET('/v3/users/{user_id}/contacts', { params: { path: { user_id: t.adminId }, query: { per_page: 1 } } }),
    );
    assert.equal(contacts.meta.total, 9980);
    const ann = await unwrap(
      client.api.GET('/v3/users/{user_id}/contacts', {
        params: { path: { user_id: t.adminId }, query: { email: ['person7@example.com'] } },
      }),
    );
    assert.equal(ann.data[0]?.first_name, 'Ann, "the first"\nof her name');
    assert.deepEqual(ann.data[0]?.tags.toSorted(), ['CLI', 'Imported', 'Spring']);

    const errors = join(scratch, 'second.csv');
    const second = await hopper(['contacts', 'import', file, '--errors', errors, '--user', String(t.adminId)], env);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, /10000 rows, 0 created, 9980 updated, 20 refused/);
    assert.equal((await readFile(errors, 'utf8')).trim().split('\n').length, refused.length);
    const again = await unwrap(
      client.api.GET('/v3/users/{user_id}/contacts', { params: { path: { user_id: t.adminId }, query: { per_page: 1 } } }),
    );
    assert.equal(again.meta.total, 9980, 'the second run created nothing');
  });

  test('a file the API refuses whole: the problem is printed, exit 1', async () => {
    const file = join(scratch, 'odd.csv');
    await writeFile(file, 'shoe_size,colour\n9,blue\n');
    const run = await hopper(['contacts', 'import', file], env);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /^hopper: Invalid request \(400\): The CSV header names no contact field\.\n {2}header: none of its columns/);
  });

  test('emails list, show, send, report and cancel', { timeout: 30_000 }, async () => {
    const tag = await unwrap(
      client.api.POST('/v3/users/{user_id}/tags', { params: { path: { user_id: t.adminId } }, body: { name: 'CLI smoke' } }),
    );
    for (const name of ['Ada', 'Bo', 'Cy']) {
      await unwrap(
        client.api.POST('/v3/users/{user_id}/contacts', {
          params: { path: { user_id: t.adminId } },
          body: { email: `${name.toLowerCase()}@smoke.example`, first_name: name, tags: ['CLI smoke'] },
        }),
      );
    }
    const draft = await unwrap(
      client.api.POST('/v3/users/{user_id}/templated_emails', {
        params: { path: { user_id: t.adminId } },
        body: { subject: 'Spring open house', body: '<p>Hello {{first_name}}</p>', recipients: [{ group: 'Tags', value: tag.id }] },
      }),
    );

    const list = await hopper(['emails', 'list', '--status', 'Saved'], env);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^id +status +send_at +recipients +sent +delivered +subject\n/);
    assert.match(list.stdout, new RegExp(`\\n *${draft.id} +Saved +1 +0 +0 +Spring open house\\n`));

    const show = await hopper(['emails', 'show', String(draft.id)], env);
    assert.equal(show.code, 0, show.stderr);
    assert.match(show.stdout, /^Templated email \d+\n/);
    assert.match(show.stdout, /\nsubject +Spring open house\n/);
    assert.match(show.stdout, /\nrecipients +Tags: CLI smoke \(tag \d+\)\n/);
    const json = await hopper(['emails', 'show', String(draft.id), '--json'], env);
    assert.equal(JSON.parse(json.stdout).id, draft.id);

    const send = await hopper(['emails', 'send', String(draft.id)], env);
    assert.equal(send.code, 0, send.stderr);
    assert.match(send.stdout, new RegExp(`^Templated email ${draft.id} is (Scheduled|Sending|Sent), to send now`));
    const deadline = Date.now() + 20_000;
    let status = '';
    while (Date.now() < deadline && status !== 'Sent') {
      status = (await unwrap(client.api.GET('/v3/templated_emails/{id}', { params: { path: { id: draft.id } } }))).status;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(status, 'Sent');

    const report = await hopper(['report', 'email', String(draft.id)], env);
    assert.equal(report.code, 0, report.stderr);
    assert.match(report.stdout, new RegExp(`^Templated email ${draft.id} "Spring open house": Sent\\n`));
    assert.match(report.stdout, /\ncounter +count\n/);
    assert.match(report.stdout, /\nsent +3\n/);
    assert.match(report.stdout, /\ndelivery state +deliveries\n/);
    assert.match(report.stdout, /\nqueued +0\n/);
    assert.match(report.stdout, /\ntotal +3\n/);

    const later = await unwrap(
      client.api.POST('/v3/users/{user_id}/templated_emails', {
        params: { path: { user_id: t.adminId } },
        body: {
          subject: 'Later',
          body: '<p>Later</p>',
          recipients: [{ group: 'Tags', value: tag.id }],
          status: 'Scheduled',
          send_type: 'Future',
          send_at: new Date(Date.now() + 86_400_000).toISOString(),
        },
      }),
    );
    const cancel = await hopper(['emails', 'cancel', String(later.id)], env);
    assert.equal(cancel.code, 0, cancel.stderr);
    assert.equal(cancel.stdout, `Templated email ${later.id} is Saved: it will not be sent until you send it again.\n`);
    const twice = await hopper(['emails', 'cancel', String(later.id)], env);
    assert.equal(twice.code, 1);
    assert.match(twice.stderr, /is Saved: there is nothing to cancel/);
  });

  test('drops, problems and usage errors', async () => {
    const none = await hopper(['drops', 'list'], env);
    assert.equal(none.code, 0, none.stderr);
    assert.equal(none.stdout, 'No voicemail drops.\n');
    const missing = await hopper(['drops', 'show', '999999'], env);
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr, 'hopper: Not found (404): Voicemail drop 999999 does not exist.\n');
    const report = await hopper(['report', 'drop', '999999'], env);
    assert.equal(report.code, 1);
    const wrongKey = await hopper(['drops', 'list'], { ...env, HOPPER_KEY: 'hop_wrong' });
    assert.equal(wrongKey.code, 1);
    assert.match(wrongKey.stderr, /\(401\)/);
    const noEnv = await hopper(['drops', 'list'], { HOME: scratch, XDG_CONFIG_HOME: join(scratch, 'none') });
    assert.equal(noEnv.code, 2);
    assert.match(noEnv.stderr, /hopper configure --url .* or set HOPPER_URL and HOPPER_KEY/);
    const badUser = await hopper(['drops', 'list'], { ...env, HOPPER_USER: 'abc' });
    assert.equal(badUser.code, 2);
    assert.match(badUser.stderr, /HOPPER_USER must be a user id/);
    const badId = await hopper(['drops', 'show', 'abc'], env);
    assert.equal(badId.code, 2);
    assert.match(badId.stderr, /Expected a positive whole number/);
  });

  test('suppressions lift: by reason and time, the contacts receive again; what the API refuses is printed, exit 1', async () => {
    const made = [];
    for (const email of ['lift-a@cli.example', 'lift-b@cli.example', 'lift-c@cli.example']) {
      made.push(
        await unwrap(client.api.POST('/v3/users/{user_id}/contacts', { params: { path: { user_id: t.adminId } }, body: { email } })),
      );
    }
    const [a, b, c] = made as [(typeof made)[0], (typeof made)[0], (typeof made)[0]];
    const setStatus = (id: number, status: 'Inactive - Invalid Email Address' | 'Unsubscribed') =>
      unwrap(client.api.PUT('/v3/contacts/{id}', { params: { path: { id } }, body: { status } }));
    await setStatus(a.id, 'Inactive - Invalid Email Address');
    await setStatus(b.id, 'Inactive - Invalid Email Address');
    await setStatus(c.id, 'Unsubscribed');
    const statusOf = async (id: number) => (await unwrap(client.api.GET('/v3/contacts/{id}', { params: { path: { id } } }))).status;

    const one = await hopper(['suppressions', 'lift', '--channel', 'email', '--contact', String(a.id), '--user', String(t.adminId)], env);
    assert.equal(one.code, 0, one.stderr);
    assert.equal(one.stdout, `Lifted 1 suppressed email address of user ${t.adminId}: it receives again.\n`);
    assert.equal(await statusOf(a.id), 'Subscribed');
    assert.equal(await statusOf(b.id), 'Inactive - Invalid Email Address');

    const later = await hopper(
      ['suppressions', 'lift', '--channel', 'email', '--reason', 'invalid_address', '--since', '2999-01-01T00:00:00Z', '--json'],
      { ...env, HOPPER_USER: String(t.adminId) },
    );
    assert.equal(later.code, 0, later.stderr);
    assert.deepEqual(JSON.parse(later.stdout), { lifted: 0 });
    const all = await hopper(['suppressions', 'lift', '--channel', 'email', '--reason', 'invalid_address'], {
      ...env,
      HOPPER_USER: String(t.adminId),
    });
    assert.equal(all.code, 0, all.stderr);
    assert.match(all.stdout, /^Lifted 1 suppressed email address of user/);
    assert.equal(await statusOf(b.id), 'Subscribed');

    // An unsubscribe is the person's own word: refused by the API, printed, exit 1; the contact stays.
    const refused = await hopper(['suppressions', 'lift', '--channel', 'email', '--reason', 'unsubscribed'], {
      ...env,
      HOPPER_USER: String(t.adminId),
    });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^hopper: .*\(400\)/);
    assert.equal(await statusOf(c.id), 'Unsubscribed');
    const badTime = await hopper(['suppressions', 'lift', '--channel', 'email', '--since', 'yesterday'], {
      ...env,
      HOPPER_USER: String(t.adminId),
    });
    assert.equal(badTime.code, 1);
    assert.match(badTime.stderr, /since/);
    const noChannel = await hopper(['suppressions', 'lift'], { ...env, HOPPER_USER: String(t.adminId) });
    assert.equal(noChannel.code, 2);
    assert.match(noChannel.stderr, /--channel/);
    const badContact = await hopper(['suppressions', 'lift', '--channel', 'phone', '--contact', 'x'], env);
    assert.equal(badContact.code, 2);
  });

  test('a reader that exits early (| head, | true) ends hopper quietly with success, not with an EPIPE stack', async () => {
    const user = { ...env, HOPPER_USER: String(t.adminId) };
    await unwrap(client.api.POST('/v3/users/{user_id}/tags', { params: { path: { user_id: t.adminId } }, body: { name: 'Piped' } }));
    const created = await hopper(['emails', 'create', '--subject', 'Piped', '--body', '<p>x</p>', '--tag', 'Piped'], user);
    assert.equal(created.code, 0, created.stderr);
    // The reader is gone before hopper writes: `true` reads nothing, `head -c 1` one byte.
    for (const pipeline of [
      '"$NODE" "$BIN" --help | true',
      '"$NODE" "$BIN" emails list | true',
      '"$NODE" "$BIN" emails list --json | head -c 1',
    ]) {
      const run = await new Promise<Run>((resolve) => {
        execFile(
          'bash',
          ['--norc', '--noprofile', '-c', `set -o pipefail; ${pipeline}`],
          { env: { PATH: process.env.PATH, ...user, NODE: process.execPath, BIN } },
          (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
        );
      });
      assert.equal(run.code, 0, `${pipeline}: ${run.stderr}`);
      assert.equal(run.stderr, '', pipeline);
    }
  });

  test('runs as `npx hopper` from the repository (the workspace bin on Node 24)', async () => {
    const run = await new Promise<Run>((resolve) => {
      const bin = join(ROOT, 'node_modules', '.bin');
      execFile(join(bin, 'hopper'), ['--help'], { env: { PATH: `${bin}:${process.env.PATH}` } }, (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      );
    });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^Usage: hopper /);
    assert.match(run.stdout, /\n {2}contacts +contacts: import a CSV file as exported\n/);
  });
});
