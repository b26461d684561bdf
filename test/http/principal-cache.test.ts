import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { buildApp } from '../../src/app.ts';
import { openDatabase } from '../../src/db/database.ts';
import { openJobQueue } from '../../src/db/job-queue.ts';
import type { App } from '../../src/http/fastify-types.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { createUser } from '../support/factories.ts';
import { startTestApp, type TestApp, usingPostgres } from '../support/test-app.ts';

/**
 * Authentication keeps the principals of recent keys (http/authenticate.ts). "A revoked key fails
 * on the very next request" must still hold: through the API of another process on the same
 * database, and for changes made in SQL. Requests go over real sockets, as a client's would.
 */
describe('principal cache', () => {
  let t: TestApp;
  let base: string;
  before(async () => {
    t = await startTestApp();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  });
  after(() => t.close());

  /** A user reads themselves with `key`: the status. */
  const get = async (server: string, key: string, userId: number) =>
    (await fetch(`${server}/v3/users/${userId}`, { headers: { authorization: `Bearer ${key}` } })).status;

  test('a key revoked through one process is refused by another on its very next request', {
    skip: !usingPostgres && 'needs PostgreSQL: PGlite serves one process',
  }, async () => {
    // A second API process: its own database handle (pool and listener), its own app.
    const database = await openDatabase(t.config);
    const queue = await openJobQueue(database, t.config);
    const other: App = await buildApp(t.config, { database, queue });
    try {
      await other.listen({ host: '127.0.0.1', port: 0 });
      const otherBase = `http://127.0.0.1:${(other.server.address() as { port: number }).port}`;
      const user = await createUser(t, 'User');
      const admin = asKey(t.app, t.adminKey);
      for (let round = 0; round < 20; round++) {
        const made = await admin.post(`/v3/users/${user.id}/api_keys`, { name: `round ${round}` });
        assert.equal(made.status, 201, made.raw);
        // Both processes have used (and cached) the key.
        assert.equal(await get(otherBase, made.body.key, user.id), 200);
        assert.equal(await get(otherBase, made.body.key, user.id), 200);
        assert.equal(await get(base, made.body.key, user.id), 200);
        const revoked = await fetch(`${base}/v3/api_keys/${made.body.id}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${t.adminKey}` },
        });
        assert.equal(revoked.status, 200);
        assert.equal(await get(otherBase, made.body.key, user.id), 401, `round ${round}: the other process refuses the revoked key`);
      }
      // A cancelled account past its grace period and a deleted user, changed in SQL.
      const cancelled = await createUser(t, 'User');
      assert.equal(await get(otherBase, cancelled.key, cancelled.id), 200);
      await sql`UPDATE users SET status = 'Cancelled', cancelled_at = now() - interval '400 days' WHERE id = ${cancelled.id}`.execute(
        t.database.db,
      );
      await becomes(otherBase, cancelled.key, cancelled.id, 403);
    } finally {
      await other.close();
      await queue.stop();
      await database.close();
    }
  });

  /**
   * A change made in SQL, outside the API, reaches the cache with its notice, which PostgreSQL sends
   * at commit but which may arrive a moment after the writer's own answer: the status is polled for
   * (the cache has no expiry, so only the notice can change it).
   */
  async function becomes(server: string, key: string, userId: number, status: number): Promise<void> {
    const until = Date.now() + 2_000;
    let last = 0;
    while (Date.now() < until) {
      last = await get(server, key, userId);
      if (last === status) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.equal(last, status, 'a change made in SQL takes effect once its notice arrives');
  }

  test('changes made in SQL take effect as soon as their notice arrives', async () => {
    const user = await createUser(t, 'User');
    assert.equal(await get(base, user.key, user.id), 200);
    assert.equal(await get(base, user.key, user.id), 200);
    await sql`UPDATE api_keys SET revoked_at = now() WHERE user_id = ${user.id}`.execute(t.database.db);
    await becomes(base, user.key, user.id, 401);

    const deleted = await createUser(t, 'User');
    assert.equal(await get(base, deleted.key, deleted.id), 200);
    await sql`UPDATE users SET deleted_at = now() WHERE id = ${deleted.id}`.execute(t.database.db);
    await becomes(base, deleted.key, deleted.id, 401);
  });

  test('another installation in the same database is not heard; a process of an earlier version still hears this one', {
    skip: !usingPostgres && 'needs PostgreSQL: a PGlite database holds one installation',
  }, async () => {
    // A second installation: its own schema in the same database, migrated as its `npm start` would.
    const other = await openDatabase({ ...t.config, databaseSchema: `${t.config.databaseSchema}_other` });
    // A process of a version before migration 0037 listens on the unscoped channel.
    const earlier = new pg.Client({ connectionString: t.config.databaseUrl });
    try {
      const heard: string[] = [];
      const heardByEarlier: string[] = [];
      await t.database.listen('hopper_principals', (payload) => payload !== undefined && heard.push(payload));
      await earlier.connect();
      earlier.on('notification', (message) => heardByEarlier.push(message.payload ?? ''));
      await earlier.query('LISTEN "hopper_principals"');

      await sql`UPDATE users SET first_name = first_name`.execute(other.db);
      await sql`UPDATE api_keys SET revoked_at = revoked_at`.execute(t.database.db);
      // Notices reach a listener in commit order: once this installation's own has arrived, the
      // other's would have arrived before it.
      await waitFor('this installation’s notice', () => heard.length > 0);
      assert.deepEqual(heard, ['api_keys'], "the other installation's change is not heard here");
      await waitFor('both notices on the unscoped channel', () => heardByEarlier.length === 2);
      assert.deepEqual(heardByEarlier, ['users', 'api_keys']);
    } finally {
      await earlier.end();
      await other.close();
      const drop = new pg.Client({ connectionString: t.config.databaseUrl });
      await drop.connect();
      await drop.query(`DROP SCHEMA IF EXISTS "${t.config.databaseSchema}_other" CASCADE`).finally(() => drop.end());
    }
  });

  test('a cached key costs no query; touching last_used_at forgets nothing', async () => {
    const user = await createUser(t, 'User');
    assert.equal(await get(base, user.key, user.id), 200);
    const before = t.database.queryCount();
    assert.equal(await get(base, user.key, user.id), 200);
    const cached = t.database.queryCount() - before;
    await sql`UPDATE api_keys SET last_used_at = now() WHERE user_id = ${user.id}`.execute(t.database.db);
    const after = t.database.queryCount();
    assert.equal(await get(base, user.key, user.id), 200);
    assert.equal(t.database.queryCount() - after, cached, 'still cached');
    await sql`UPDATE users SET first_name = 'Renamed' WHERE id = ${user.id}`.execute(t.database.db);
    // A write outside the API is noticed when its NOTIFY arrives over the listening connection:
    // on a loaded machine that may be after the next request (API writes wait for it: settle()).
    await waitFor(
      'a change to a user to be looked up again',
      async () => {
        const renamed = t.database.queryCount();
        assert.equal(await get(base, user.key, user.id), 200);
        return t.database.queryCount() - renamed === cached + 1;
      },
      { timeoutMs: 5_000 },
    );
  });

  test("a minute's new rate count is not counted as a request's statement", async () => {
    // 50 ms before a minute starts: the limiter refills the key's and the user's allotments then.
    let now = Math.ceil(Date.now() / 60_000) * 60_000 + 60_000 - 50;
    const timed = await startTestApp({ clock: () => new Date(now) });
    try {
      const user = await createUser(timed, 'User');
      const client = asKey(timed.app, user.key);
      assert.equal((await client.get(`/v3/users/${user.id}`)).status, 200);
      const before = timed.database.queryCount();
      assert.equal((await client.get(`/v3/users/${user.id}`)).status, 200);
      const statements = timed.database.queryCount() - before;
      now += 100;
      const next = timed.database.queryCount();
      assert.equal((await client.get(`/v3/users/${user.id}`)).status, 200);
      assert.equal(timed.database.queryCount() - next, statements);
    } finally {
      await timed.close();
    }
  });
});
