import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { ensureSecret } from '../../src/db/secrets.ts';
import { loadTrackingTokens, TRACKING_KEY_SECRET, TrackingTokens } from '../../src/email/tokens.ts';
import { testConfigEnv } from '../support/test-app.ts';

/** The signed tokens of tracking and unsubscribe links, and the database-held key that signs them. */
describe('tracking tokens', () => {
  const tokens = new TrackingTokens(randomBytes(32));

  test('each purpose round-trips its delivery (and link), URL-safe and short', () => {
    for (const id of [1, 42, 2 ** 40 + 7, Number.MAX_SAFE_INTEGER]) {
      for (const purpose of ['open', 'unsubscribe'] as const) {
        const token = tokens.sign(purpose, id);
        assert.match(token, /^[A-Za-z0-9_-]{35}$/);
        assert.deepEqual(tokens.verify(purpose, token), { deliveryId: id, link: 0 });
      }
      for (const link of [0, 1, 65_535]) {
        const token = tokens.sign('click', id, link);
        assert.match(token, /^[A-Za-z0-9_-]{38}$/);
        assert.deepEqual(tokens.verify('click', token), { deliveryId: id, link });
      }
    }
  });

  test('a token is good for its own purpose only', () => {
    const open = tokens.sign('open', 7);
    assert.equal(tokens.verify('unsubscribe', open), undefined);
    assert.equal(tokens.verify('click', open), undefined);
    assert.equal(tokens.verify('open', tokens.sign('unsubscribe', 7)), undefined);
    assert.equal(tokens.verify('unsubscribe', tokens.sign('click', 7, 0).slice(0, 35)), undefined);
  });

  test('any changed, cut, padded or re-spelled token is refused', () => {
    for (const purpose of ['open', 'click', 'unsubscribe'] as const) {
      const token = tokens.sign(purpose, 12_345, purpose === 'click' ? 3 : 0);
      for (let i = 0; i < token.length; i++) {
        const swapped = token[i] === 'A' ? 'B' : 'A';
        assert.equal(tokens.verify(purpose, token.slice(0, i) + swapped + token.slice(i + 1)), undefined, `${purpose} char ${i}`);
      }
      for (const bad of [token.slice(0, -1), `${token}A`, `${token}=`, token.replace(/.$/, '.'), '', 'not a token', '../../etc/passwd']) {
        assert.equal(tokens.verify(purpose, bad), undefined, `${purpose}: ${bad}`);
      }
    }
    // Another server's key signs nothing here.
    assert.equal(tokens.verify('open', new TrackingTokens(randomBytes(32)).sign('open', 1)), undefined);
  });

  test('signing refuses what a token cannot carry', () => {
    assert.throws(() => tokens.sign('open', 0), RangeError);
    assert.throws(() => tokens.sign('open', 1.5), RangeError);
    assert.throws(() => tokens.sign('click', 1, 65_536), RangeError);
    assert.throws(() => tokens.sign('unsubscribe', 1, 2), RangeError);
    assert.throws(() => new TrackingTokens(randomBytes(16)), RangeError);
  });

  test('the key is made once per database, by whoever asks first, and survives a restart', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'hopper-test-'));
    const config = loadConfig(testConfigEnv(dataDir));
    let database = await openDatabase(config);
    try {
      // Concurrent first asks (several processes starting at once) all end with the one stored key.
      const keys = await Promise.all(Array.from({ length: 6 }, () => ensureSecret(database.db, TRACKING_KEY_SECRET, new Date())));
      assert.equal(keys[0]?.length, 32);
      for (const key of keys) assert.deepEqual(key, keys[0]);
      const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM secrets`.execute(database.db);
      assert.equal(Number(rows[0]?.n), 1);
      const token = (await loadTrackingTokens(database.db)).sign('unsubscribe', 99);

      await database.close();
      database = await openDatabase(config);
      assert.deepEqual(await ensureSecret(database.db, TRACKING_KEY_SECRET, new Date()), keys[0]);
      assert.deepEqual((await loadTrackingTokens(database.db)).verify('unsubscribe', token), { deliveryId: 99, link: 0 });
      assert.notDeepEqual(await ensureSecret(database.db, 'another', new Date()), keys[0], 'each name has its own secret');
    } finally {
      if (config.databaseUrl) await sql`DROP SCHEMA ${sql.id(config.databaseSchema)} CASCADE`.execute(database.db);
      await database.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
