import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout } from 'node:timers/promises';
import { sql } from 'kysely';
import type { OneConnection } from '../../src/db/one-connection.ts';
import { startTestApp, type TestApp, usingPostgres } from '../support/test-app.ts';

/**
 * PGlite's one connection (db/one-connection.ts): background work that calls `quiet()` goes when
 * the connection has been free for a moment, and after 100 ms whatever holds it. The import's
 * batches wait so (test/security/import-stall.test.ts judges what the requests gain).
 */
describe("PGlite's one connection, taken by background work in a pause", {
  skip: usingPostgres && 'PGlite only: PostgreSQL has a pool',
}, () => {
  let t: TestApp;
  let one: OneConnection;

  before(async () => {
    t = await startTestApp();
    one = t.database.oneConnection as OneConnection;
    assert.ok(one);
  });
  after(() => t.close());

  /** A transaction that holds the connection across `ms` of timers; `ended` is when its last statement ran. */
  function holding(ms: number) {
    const state = { ended: 0 };
    const done = t.database.db.transaction().execute(async (trx) => {
      await sql`SELECT 1`.execute(trx);
      await setTimeout(ms);
      await sql`SELECT 2`.execute(trx);
      state.ended = performance.now();
    });
    return { state, done };
  }

  test('quiet() waits for a transaction that holds the connection to end, and a pause after it', async () => {
    const { state, done } = holding(30);
    await setTimeout(5);
    const called = performance.now();
    await one.quiet();
    const at = performance.now();
    await done;
    // On a loaded machine the transaction's timer may fire late: then quiet() has given up waiting at 100 ms.
    if (state.ended > 0) assert.ok(at - state.ended >= 2, `quiet() ${(at - state.ended).toFixed(1)} ms after the transaction ended`);
    else assert.ok(at - called >= 100, `quiet() after ${(at - called).toFixed(1)} ms, the transaction still running`);
  });

  test('quiet() goes after 100 ms whatever holds the connection', async () => {
    const { state, done } = holding(1000);
    await setTimeout(5);
    const called = performance.now();
    await one.quiet();
    const waited = performance.now() - called;
    assert.equal(state.ended, 0, 'the transaction still runs');
    assert.ok(waited >= 100, `waited ${waited.toFixed(1)} ms`);
    await done;
  });

  test('quiet() on a connection left alone goes at once', async () => {
    await setTimeout(10);
    const called = performance.now();
    await one.quiet();
    assert.ok(performance.now() - called < 100, `waited ${(performance.now() - called).toFixed(1)} ms`);
  });
});
