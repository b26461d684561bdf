import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { displayPrefix, generateApiKey, hashApiKey, parseApiKey } from '../../src/api-key-format.ts';
import { asKey } from '../support/client.ts';
import { assertProblem, createUser, TIMESTAMP } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

describe('API key format', () => {
  test('hop_ + 40 base62 + 6-character CRC-32 checksum', () => {
    const key = generateApiKey();
    assert.match(key, /^hop_[0-9A-Za-z]{46}$/);
    assert.equal(parseApiKey(key), key);
    assert.equal(displayPrefix(key), key.slice(0, 10));
  });

  test('a changed character, a wrong length or another prefix fails the check', () => {
    const key = generateApiKey();
    const flipped = key.slice(0, 20) + (key[20] === 'a' ? 'b' : 'a') + key.slice(21);
    assert.equal(parseApiKey(flipped), undefined);
    assert.equal(parseApiKey(key.slice(0, -1)), undefined);
    assert.equal(parseApiKey(`ghp_${key.slice(4)}`), undefined);
    assert.equal(parseApiKey(`${key} `), undefined);
  });

  test('the checksum is CRC-32 of the random part in base62, left-padded to 6', () => {
    // Vector computed independently (Python's zlib.crc32(b'0' * 40)): 0x963fbb8e.
    let n = 0x963fbb8e;
    let text = '';
    const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    while (n > 0) {
      text = alphabet[n % 62] + text;
      n = Math.floor(n / 62);
    }
    const key = `hop_${'0'.repeat(40)}${text.padStart(6, '0')}`;
    assert.equal(parseApiKey(key), key);
  });

  test('keys are stored as SHA-256 digests', () => {
    assert.equal(hashApiKey('hop_x').length, 32);
  });
});

describe('API key lifecycle', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('a created key works, is shown once, and is stored only as a digest', async () => {
    const owner = await createUser(t, 'User');
    const created = await asKey(t.app, owner.key).post(`/v3/users/${owner.id}/api_keys`, { name: 'Zapier' });
    assert.equal(created.status, 201);
    assert.equal(created.headers['cache-control'], 'no-store');
    assert.equal(created.headers.location, `https://hopper.test/v3/api_keys/${created.body.id}`);
    assert.deepEqual(Object.keys(created.body).sort(), ['created_at', 'created_by', 'id', 'key', 'last_used_at', 'name', 'prefix']);
    assert.equal(created.body.created_by, owner.id);
    assert.equal(created.body.prefix, created.body.key.slice(0, 10));
    assert.match(created.body.created_at, TIMESTAMP);
    assert.equal(created.body.last_used_at, null);

    const use = await asKey(t.app, created.body.key).get(`/v3/users/${owner.id}`);
    assert.equal(use.status, 200);

    const listed = await asKey(t.app, owner.key).get(`/v3/users/${owner.id}/api_keys`);
    const entry = listed.body.data.find((k: { id: number }) => k.id === created.body.id);
    assert.equal(entry.key, undefined, 'the key is never listed');
    assert.match(entry.last_used_at, TIMESTAMP, 'last_used_at is recorded');
    const read = await asKey(t.app, owner.key).get(`/v3/api_keys/${created.body.id}`);
    assert.equal(read.body.key, undefined);

    const rows = await t.database.db.selectFrom('api_keys').selectAll().where('id', '=', created.body.id).execute();
    assert.equal(rows.length, 1);
    assert.ok(!JSON.stringify(rows).includes(created.body.key.slice(4)), 'no clear key in the database');
    assert.deepEqual(Buffer.from(rows[0]?.key_hash as Uint8Array), hashApiKey(created.body.key));
  });

  test('a revoked key fails on the very next request', async () => {
    const owner = await createUser(t, 'User');
    const created = await asKey(t.app, owner.key).post(`/v3/users/${owner.id}/api_keys`, { name: 'temporary' });
    const client = asKey(t.app, created.body.key);
    assert.equal((await client.get(`/v3/users/${owner.id}`)).status, 200);
    const revoked = await client.delete(`/v3/api_keys/${created.body.id}`);
    assert.deepEqual(revoked.body, { success: true });
    const after = await client.get(`/v3/users/${owner.id}`);
    assertProblem(after, 401, 'unauthorized');
    assert.match(String(after.headers['www-authenticate']), /invalid_token/);
    assert.equal((await asKey(t.app, owner.key).delete(`/v3/api_keys/${created.body.id}`)).status, 404, 'revoking twice is a 404');
  });

  test('a key with a bad checksum is rejected without a database hit', async () => {
    const good = generateApiKey();
    const bad = `${good.slice(0, -1)}${good.endsWith('0') ? '1' : '0'}`;
    const before = t.database.queryCount();
    const reply = await asKey(t.app, bad).get('/v3/users');
    assertProblem(reply, 401, 'unauthorized');
    assert.match(reply.body.detail, /malformed/);
    assert.equal(t.database.queryCount(), before, 'no query was run');
  });

  test('a well-formed key nobody holds is a 401', async () => {
    const reply = await asKey(t.app, generateApiKey()).get('/v3/users');
    assertProblem(reply, 401);
    assert.match(reply.body.detail, /unknown or has been revoked/);
  });

  test('names are required, trimmed to limits, and unknown fields refused', async () => {
    const owner = await createUser(t, 'User');
    const client = asKey(t.app, owner.key);
    assert.deepEqual((await client.post(`/v3/users/${owner.id}/api_keys`, {})).body.errors, { name: ['is required'] });
    assert.deepEqual((await client.post(`/v3/users/${owner.id}/api_keys`, { name: '' })).body.errors, { name: ['must not be empty'] });
    assert.deepEqual((await client.post(`/v3/users/${owner.id}/api_keys`, { name: 'x'.repeat(256) })).body.errors, {
      name: ['must be at most 255 characters'],
    });
    assert.deepEqual((await client.post(`/v3/users/${owner.id}/api_keys`, { name: 'ok', scope: 'all' })).body.errors, {
      scope: ['is not a known field'],
    });
  });
});
