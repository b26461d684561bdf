import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { bootstrapAdministrator } from '../../src/identity/bootstrap.ts';
import { verifyPassword } from '../../src/identity/passwords.ts';
import { asKey } from '../support/client.ts';
import { assertProblem } from '../support/factories.ts';
import { startTestApp, type TestApp, testConfigEnv } from '../support/test-app.ts';
import { browser } from './web-client.ts';

describe('passwords', () => {
  let t: TestApp;
  const logLines: string[] = [];
  before(async () => {
    const logStream = new PassThrough();
    logStream.on('data', (chunk) => logLines.push(String(chunk)));
    t = await startTestApp({ logStream, env: { LOG_LEVEL: 'info' } });
  });
  after(() => t.close());

  test('a password is set through POST and PUT /v3/users, never returned, and at least 12 characters', async () => {
    const admin = asKey(t.app, t.adminKey);
    const created = await admin.post('/v3/users', {
      first_name: 'Pat',
      last_name: 'Word',
      email: 'pat@example.com',
      password: 'first passphrase',
    });
    assert.equal(created.status, 201, created.raw);
    assert.doesNotMatch(created.raw, /password|first passphrase|scrypt/);
    assert.equal((await browser(t.app).signIn('pat@example.com', 'first passphrase')).status, 303);

    const short = await admin.put(`/v3/users/${created.body.id}`, { password: 'too short' });
    assertProblem(short, 400, 'validation');
    assert.deepEqual(short.body.errors, { password: ['must be at least 12 characters'] });
    assertProblem(await admin.put(`/v3/users/${created.body.id}`, { password: 'x'.repeat(1025) }), 400, 'validation');

    const updated = await admin.put(`/v3/users/${created.body.id}`, { password: 'second passphrase' });
    assert.equal(updated.status, 200);
    assert.doesNotMatch(updated.raw, /password|second passphrase|scrypt/);
    assert.doesNotMatch((await admin.get(`/v3/users/${created.body.id}`)).raw, /password/);
    assert.equal((await browser(t.app).signIn('pat@example.com', 'first passphrase')).status, 422);
    assert.equal((await browser(t.app).signIn('pat@example.com', 'second passphrase')).status, 303);

    const stored = await t.database.db
      .selectFrom('users')
      .select('password_hash')
      .where('id', '=', created.body.id)
      .executeTakeFirstOrThrow();
    assert.match(String(stored.password_hash), /^\$scrypt\$ln=\d+,r=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/);
    const doc = await asKey(t.app, undefined).get('/v3/openapi.json');
    const given = doc.body.paths['/v3/users'].post.requestBody.content['application/json'].schema;
    // The body is a named component in the document.
    const schema = given.$ref ? doc.body.components.schemas[String(given.$ref).split('/').pop() as string] : given;
    assert.equal(schema.properties.password.writeOnly, true);
  });

  test('passwords never appear in the logs', async () => {
    const admin = asKey(t.app, t.adminKey);
    const secrets = ['log secret number one', 'log secret number two', 'too-short-9', 'typed into the email'] as const;
    const created = await admin.post('/v3/users', { first_name: 'Lo', last_name: 'Gs', email: 'logs@example.com', password: secrets[0] });
    assert.equal(created.status, 201);
    assert.equal((await admin.put(`/v3/users/${created.body.id}`, { password: secrets[1] })).status, 200);
    assert.equal((await admin.put(`/v3/users/${created.body.id}`, { password: secrets[2] })).status, 400);
    assert.equal((await browser(t.app).signIn('logs@example.com', secrets[0])).status, 422);
    assert.equal((await browser(t.app).signIn(secrets[3], secrets[1])).status, 422);
    assert.equal((await browser(t.app).signIn('logs@example.com', secrets[1])).status, 303);

    const log = logLines.join('');
    assert.match(log, /sign-in failed/, 'the log level lets sign-in lines through');
    assert.match(log, /signed in/);
    for (const secret of secrets) assert.equal(log.includes(secret), false, `"${secret}" leaked into the log`);
    assert.doesNotMatch(log, /scrypt\$/);
  });
});

test('the first-start Administrator gets a one-time password, stored only as a hash', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'hopper-test-'));
  const config = loadConfig(testConfigEnv(dataDir));
  const database = await openDatabase(config);
  try {
    const first = await bootstrapAdministrator(database.db, config);
    assert.equal(first.kind, 'first-start');
    if (first.kind !== 'first-start') return;
    assert.match(first.password, /^[A-Za-z0-9]{20}$/);
    const row = await database.db.selectFrom('users').select('password_hash').where('id', '=', first.userId).executeTakeFirstOrThrow();
    assert.equal(await verifyPassword(first.password, row.password_hash), true);
    assert.equal((await bootstrapAdministrator(database.db, config)).kind, 'none', 'printed once: a second start creates nothing');
  } finally {
    if (config.databaseUrl) await sql`DROP SCHEMA ${sql.id(config.databaseSchema)} CASCADE`.execute(database.db);
    await database.close();
    await rm(dataDir, { recursive: true, force: true });
  }
});
