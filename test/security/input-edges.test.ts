import assert from 'node:assert/strict';
import { lstat, mkdtemp, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { saveProfile } from '../../clients/cli/src/config.ts';
import { urlProblem } from '../../src/net/address-guard.ts';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * Finding 8 of issue 36, the small ones: a lone UTF-16 surrogate in `metadata` and deeply nested
 * JSON were 500s (PostgreSQL's jsonb refuses `\ud800`; a recursive walk of the body ran out of
 * stack); IPv4-compatible IPv6 (`::/96`, `::7f00:1` is 127.0.0.1) passed the address guard;
 * `hopper configure` wrote its profile through `config.json.<pid>.tmp`, a name anyone could guess
 * and plant a symlink at. (The forward's display name: inbound-forward.test.ts.)
 */
describe('input at the edges', () => {
  let t: TestApp;
  let user: Actor;
  before(async () => {
    t = await startTestApp();
    user = await createUser(t, 'User');
  });
  after(() => t.close());

  const emailBody = (extra: Record<string, unknown>) => ({ subject: 'Hello', body: '<p>Hi</p>', ...extra });

  test('a lone surrogate in metadata, a key or any other string is a 400 naming it, never a 500', async () => {
    const api = asKey(t.app, user.key);
    const url = `/v3/users/${user.id}/templated_emails`;
    // Written by hand: JSON.stringify would escape the surrogate the same way, as \ud800.
    for (const raw of [
      '{"subject":"Hello","body":"<p>Hi</p>","metadata":{"crm":"\\ud800"}}',
      '{"subject":"Hello","body":"<p>Hi</p>","metadata":{"\\udc00x":"a"}}',
      '{"subject":"Hello \\udfff there","body":"<p>Hi</p>"}',
    ]) {
      const reply = await api.post(url, raw, { 'content-type': 'application/json' });
      assertProblem(reply, 400, 'bad_request');
      assert.match(reply.body.detail, /surrogate/, raw);
    }
    // A pair is a character like any other.
    const ok = await api.post(url, emailBody({ metadata: { crm: '\ud83d\ude00' } }));
    assert.equal(ok.status, 201, ok.raw);
    assert.deepEqual(ok.body.metadata, { crm: '😀' });
  });

  test('JSON nested half a million deep (and just past the limit) is a 400 saying so', async () => {
    const api = asKey(t.app, user.key);
    const url = `/v3/users/${user.id}/templated_emails`;
    // 1 MB is the body limit: half a million arrays in arrays fill it.
    for (const depth of [500_000, 65]) {
      const raw = `{"subject":"Hello","body":"<p>Hi</p>","metadata":{"a":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
      const reply = await api.post(url, raw, { 'content-type': 'application/json' });
      assertProblem(reply, 400, 'bad_request');
      assert.match(reply.body.detail, /nested/);
    }
    const deepObject = `${'{"a":'.repeat(150_000)}1${'}'.repeat(150_000)}`;
    assertProblem(await api.post(url, deepObject, { 'content-type': 'application/json' }), 400, 'bad_request');
    // Still the schema's 400 for a shallow body that is merely wrong.
    assertProblem(await api.post(url, emailBody({ metadata: { a: [[1]] } })), 400, 'validation');
  });

  test('an import line nested a million deep, or holding a lone surrogate, is a refused row; the others are imported', async () => {
    const api = asKey(t.app, user.key);
    const lines = [
      '{"email":"first@edges.example"}',
      `{"email":"deep@edges.example","first_name":${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}}`,
      '{"email":"pair@edges.example","first_name":"\\ud83d\\ude00"}',
      '{"email":"lone@edges.example","first_name":"Ann\\udc00"}',
    ];
    const reply = await api.post(`/v3/users/${user.id}/contacts/import`, `${lines.join('\n')}\n`, {
      'content-type': 'application/x-ndjson',
    });
    assert.equal(reply.status, 200, reply.raw.slice(0, 300));
    assert.equal(reply.body.created, 2);
    assert.deepEqual(
      reply.body.refused.map((r: { line: number }) => r.line),
      [2, 4],
    );
    assert.match(reply.body.refused[0].errors.row[0], /nested deeper than/);
    assert.match(reply.body.refused[1].errors.row[0], /first_name holds a lone UTF-16 surrogate/);
  });

  test('IPv4-compatible IPv6 (::/96) is an internal address: refused as a URL host', async () => {
    const rules = { allowHttp: false, allowPrivate: false };
    for (const host of ['[::7f00:1]', '[::127.0.0.1]', '[::a9fe:a9fe]', '[::a00:1]', '[::ffff:0:7f00:1]']) {
      assert.ok(urlProblem(new URL(`https://${host}/a.mp3`), rules), host);
    }
    assert.equal(urlProblem(new URL('https://[2606:4700::6810:84e5]/a.mp3'), rules), undefined, 'a public IPv6 address passes');
    const reply = await asKey(t.app, user.key).post(`/v3/users/${user.id}/media`, { full_url: 'https://[::a9fe:a9fe]/latest/meta-data' });
    assertProblem(reply, 400, 'validation');
    assert.match(reply.body.errors.full_url[0], /private or loopback/);
  });

  test('hopper configure never writes through a file someone planted: the profile lands, the planted target is untouched', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hopper-configure-'));
    try {
      const path = join(dir, 'config.json');
      const victim = join(dir, 'victim');
      await writeFile(victim, 'keep me\n');
      // The name the CLI used to write through, planted beforehand as a symlink to the victim.
      await symlink(victim, `${path}.${process.pid}.tmp`);
      const io = { env: { HOPPER_CONFIG: path }, stdout: new PassThrough(), stderr: new PassThrough() };
      await saveProfile(io, 'default', { url: 'https://hopper.example', key: 'hop_secret' }, true);
      assert.equal(await readFile(victim, 'utf8'), 'keep me\n', 'the symlink was not followed');
      assert.equal(await readlink(`${path}.${process.pid}.tmp`), victim, 'nor replaced');
      const written = JSON.parse(await readFile(path, 'utf8'));
      assert.equal(written.profiles.default.key, 'hop_secret');
      assert.equal((await lstat(path)).mode & 0o777, 0o600);
      // Written again over itself, nothing is left behind but the file and what was planted.
      await saveProfile(io, 'default', { user: 7 }, false);
      assert.equal(JSON.parse(await readFile(path, 'utf8')).profiles.default.user, 7);
      const { readdir } = await import('node:fs/promises');
      assert.deepEqual((await readdir(dir)).sort(), ['config.json', `config.json.${process.pid}.tmp`, 'victim'].sort());
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
