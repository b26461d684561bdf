import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { mp3File } from '../media/fixtures.ts';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** Idempotency-Key on POST (Stripe's semantics), through the real app and database. */
describe('Idempotency-Key', () => {
  let t: TestApp;
  let alice: Actor;
  let bob: Actor;
  before(async () => {
    t = await startTestApp({ env: { MEDIA_FETCH_ALLOW_PRIVATE: 'true' } });
    alice = await createUser(t, 'User');
    bob = await createUser(t, 'User');
  });
  after(() => t.close());

  const countContacts = async (userId: number) =>
    Number(
      (
        await t.database.db
          .selectFrom('contacts')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('user_id', '=', userId)
          .executeTakeFirst()
      )?.n,
    );

  test('a repeat gets the first response byte for byte and creates nothing', async () => {
    const api = asKey(t.app, alice.key);
    const body = { email: 'once@example.com', first_name: 'Once' };
    const first = await api.post(`/v3/users/${alice.id}/contacts`, body, { 'idempotency-key': 'k-create-1' });
    assert.equal(first.status, 201, first.raw);
    assert.equal(first.headers['idempotent-replayed'], undefined);
    const before = await countContacts(alice.id);
    const again = await api.post(`/v3/users/${alice.id}/contacts`, body, { 'idempotency-key': 'k-create-1' });
    assert.equal(again.status, 201);
    assert.equal(again.raw, first.raw);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.headers.location, first.headers.location);
    assert.match(String(again.headers['content-type']), /^application\/json/);
    assert.equal(await countContacts(alice.id), before);
  });

  test('a secret shown once (a new API key) is replayed, but nothing stored reveals it or the client key', async () => {
    const api = asKey(t.app, alice.key);
    const clientKey = 'k-mint-secret-0001';
    const first = await api.post(`/v3/users/${alice.id}/api_keys`, { name: 'CRM' }, { 'idempotency-key': clientKey });
    assert.equal(first.status, 201, first.raw);
    const again = await api.post(`/v3/users/${alice.id}/api_keys`, { name: 'CRM' }, { 'idempotency-key': clientKey });
    assert.equal(again.raw, first.raw);
    const rows = await t.database.db.selectFrom('idempotency_keys').selectAll().where('user_id', '=', alice.id).execute();
    const stored = JSON.stringify(rows.map((row) => ({ ...row, body: row.body?.toString('latin1') })));
    assert.ok(stored.length > 0 && rows.length > 0);
    assert.ok(!stored.includes(first.body.key), 'the new API key is not stored in clear');
    assert.ok(!stored.includes(clientKey), "the client's Idempotency-Key is stored only as a digest");
  });

  test('the same key with another body is a 422; with no key nothing changes', async () => {
    const api = asKey(t.app, alice.key);
    const first = await api.post(`/v3/users/${alice.id}/contacts`, { email: 'a1@example.com' }, { 'idempotency-key': 'k-mismatch' });
    assert.equal(first.status, 201);
    const other = await api.post(`/v3/users/${alice.id}/contacts`, { email: 'a2@example.com' }, { 'idempotency-key': 'k-mismatch' });
    assertProblem(other, 422, 'idempotency_mismatch');
    const otherPath = await api.post(`/v3/users/${alice.id}/tags`, { name: 'x' }, { 'idempotency-key': 'k-mismatch' });
    assertProblem(otherPath, 422, 'idempotency_mismatch');
  });

  test('two concurrent requests with one key: one 201 and one 409', async () => {
    // The first request (media from a URL) waits on a file server that holds its answer until the
    // second request has been answered: the two truly overlap.
    let arrived!: () => void;
    const fetched = new Promise<void>((resolve) => (arrived = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const server = createServer((_request, response) => {
      arrived();
      gate.then(() => response.writeHead(200, { 'content-type': 'audio/mpeg' }).end(mp3File(1)));
    }).listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const api = asKey(t.app, alice.key);
      const body = { full_url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/held.mp3` };
      const before = await t.database.db.selectFrom('media').select('id').execute();
      const first = api.post(`/v3/users/${alice.id}/media`, body, { 'idempotency-key': 'k-race' });
      await fetched;
      const second = await api.post(`/v3/users/${alice.id}/media`, body, { 'idempotency-key': 'k-race' });
      assertProblem(second, 409, 'idempotency_conflict');
      release();
      const done = await first;
      assert.equal(done.status, 201, done.raw);
      const third = await api.post(`/v3/users/${alice.id}/media`, body, { 'idempotency-key': 'k-race' });
      assert.equal(third.status, 201);
      assert.equal(third.raw, done.raw);
      const afterwards = await t.database.db.selectFrom('media').select('id').execute();
      assert.equal(afterwards.length, before.length + 1, 'one file created');
    } finally {
      release();
      server.closeAllConnections();
      server.close();
    }
  });

  test('keys are per user', async () => {
    const a = await asKey(t.app, alice.key).post(`/v3/users/${alice.id}/tags`, { name: 'Shared key' }, { 'idempotency-key': 'k-shared' });
    const b = await asKey(t.app, bob.key).post(`/v3/users/${bob.id}/tags`, { name: 'Shared key' }, { 'idempotency-key': 'k-shared' });
    assert.equal(a.status, 201);
    assert.equal(b.status, 201);
    assert.equal(b.headers['idempotent-replayed'], undefined);
    assert.notEqual(a.body.id, b.body.id);
  });

  test('a refused request takes no key; an error response is replayed; a bad key is a 400', async () => {
    const api = asKey(t.app, alice.key);
    const invalid = await api.post(`/v3/users/${alice.id}/contacts`, { email: 'not an email' }, { 'idempotency-key': 'k-invalid' });
    assertProblem(invalid, 400);
    const fixed = await api.post(`/v3/users/${alice.id}/contacts`, { email: 'valid@example.com' }, { 'idempotency-key': 'k-invalid' });
    assert.equal(fixed.status, 201, 'a body refused by validation did not take the key');
    const dup = await api.post(`/v3/users/${alice.id}/tags`, { name: 'Dup' }, { 'idempotency-key': 'k-tag-1' });
    assert.equal(dup.status, 201);
    const conflict = await api.post(`/v3/users/${alice.id}/tags`, { name: 'Dup' }, { 'idempotency-key': 'k-tag-2' });
    assert.ok(conflict.status >= 400 && conflict.status < 500, conflict.raw);
    const replayed = await api.post(`/v3/users/${alice.id}/tags`, { name: 'Dup' }, { 'idempotency-key': 'k-tag-2' });
    assert.equal(replayed.status, conflict.status);
    assert.equal(replayed.raw, conflict.raw);
    assert.equal(replayed.headers['idempotent-replayed'], 'true');
    assertProblem(await api.post(`/v3/users/${alice.id}/tags`, { name: 'y' }, { 'idempotency-key': 'x'.repeat(256) }), 400);
    assertProblem(await api.post(`/v3/users/${alice.id}/tags`, { name: 'y' }, { 'idempotency-key': 'has space' }), 400);
  });

  test('after 24 hours a key is new again', async () => {
    const api = asKey(t.app, alice.key);
    const first = await api.post(`/v3/users/${alice.id}/tags`, { name: 'Daily' }, { 'idempotency-key': 'k-old' });
    assert.equal(first.status, 201);
    await t.database.db
      .updateTable('idempotency_keys')
      .set({ created_at: new Date(Date.now() - 25 * 3_600_000) })
      .where('user_id', '=', alice.id) // a day later for all of Alice's keys (stored as digests)
      .execute();
    await asKey(t.app, alice.key).delete(`/v3/tags/${first.body.id}`);
    const again = await api.post(`/v3/users/${alice.id}/tags`, { name: 'Daily' }, { 'idempotency-key': 'k-old' });
    assert.equal(again.status, 201);
    assert.equal(again.headers['idempotent-replayed'], undefined);
    assert.notEqual(again.body.id, first.body.id);
  });
});
