import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser, TIMESTAMP } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** The webhook endpoint resource: its shape, its rules, bad input and the one access rule. */
describe('webhook endpoints', () => {
  let t: TestApp;
  let owner: Actor;
  let teamAdmin: Actor;
  let stranger: Actor;
  const as = (actor: Actor | 'admin') => asKey(t.app, actor === 'admin' ? t.adminKey : actor.key);
  const body = (extra: Record<string, unknown> = {}) => ({ url: 'https://crm.example.com/hooks', events: ['contact.created'], ...extra });

  before(async () => {
    t = await startTestApp();
    const team = await createTeam(t);
    owner = await createUser(t, 'User', team);
    teamAdmin = await createUser(t, 'Team Administrator', team);
    stranger = await createUser(t, 'User', await createTeam(t));
  });
  after(() => t.close());

  test('create shows the secret once; reads never do', async () => {
    const created = await as(owner).post(`/v3/users/${owner.id}/webhooks`, body({ description: 'CRM' }));
    assert.equal(created.status, 201, created.raw);
    assert.match(created.body.secret, /^whsec_/);
    assert.equal(Buffer.from(created.body.secret.slice(6), 'base64').length, 32);
    assert.equal(created.headers.location, `https://hopper.test/v3/webhooks/${created.body.id}`);
    assert.deepEqual(
      { ...created.body, secret: undefined, id: undefined, created_at: undefined, updated_at: undefined },
      {
        id: undefined,
        user_id: owner.id,
        scope: 'user',
        team_id: null,
        url: 'https://crm.example.com/hooks',
        description: 'CRM',
        events: ['contact.created'],
        enabled: true,
        disabled_reason: null,
        failing_since: null,
        paused_until: null,
        previous_secret_expires_at: null,
        created_at: undefined,
        updated_at: undefined,
        secret: undefined,
      },
    );
    assert.match(created.body.created_at, TIMESTAMP);
    const read = await as(owner).get(`/v3/webhooks/${created.body.id}`);
    assert.equal(read.status, 200);
    assert.equal(read.body.secret, undefined);
    const listed = await as(owner).get(`/v3/users/${owner.id}/webhooks`);
    assert.equal(listed.status, 200);
    assert.ok(listed.body.data.every((e: { secret?: string }) => e.secret === undefined));
    assert.ok(listed.body.data.some((e: { id: number }) => e.id === created.body.id));
  });

  test('update changes the fields present; enabling again clears the reason', async () => {
    const { body: endpoint } = await as(owner).post(`/v3/users/${owner.id}/webhooks`, body());
    const changed = await as(owner).put(`/v3/webhooks/${endpoint.id}`, { events: ['contact.updated', 'delivery.sent'], enabled: false });
    assert.equal(changed.status, 200, changed.raw);
    assert.deepEqual(changed.body.events, ['contact.updated', 'delivery.sent']);
    assert.equal(changed.body.enabled, false);
    assert.equal(changed.body.url, endpoint.url);
    await t.database.db
      .updateTable('webhook_endpoints')
      .set({ disabled_reason: 'failing', failing_since: new Date() })
      .where('id', '=', endpoint.id)
      .execute();
    const enabled = await as(owner).put(`/v3/webhooks/${endpoint.id}`, { enabled: true });
    assert.equal(enabled.body.enabled, true);
    assert.equal(enabled.body.disabled_reason, null);
    assert.equal(enabled.body.failing_since, null);
    // A read body can be PUT back as it is.
    const back = await as(owner).put(`/v3/webhooks/${endpoint.id}`, enabled.body);
    assert.equal(back.status, 200, back.raw);
    const deleted = await as(owner).delete(`/v3/webhooks/${endpoint.id}`);
    assert.equal(deleted.status, 200);
    assertProblem(await as(owner).get(`/v3/webhooks/${endpoint.id}`), 404);
  });

  test('bad input is a clear 400, never a 500', async () => {
    const post = (b: unknown) => as(owner).post(`/v3/users/${owner.id}/webhooks`, b);
    const cases: [unknown, string][] = [
      [{ events: ['contact.created'] }, 'url'],
      [{ url: 'https://x.example.com' }, 'events'],
      [body({ events: [] }), 'events'],
      [body({ events: ['contact.exploded'] }), 'events'],
      [body({ events: 'contact.created' }), 'events'],
      [body({ events: ['contact.created', 'contact.created'] }), 'events'],
      [body({ url: 42 }), 'url'],
      [body({ url: 'not a url' }), 'url'],
      [body({ url: `https://example.com/${'a'.repeat(3000)}` }), 'url'],
      [body({ url: 'https://user:pw@example.com/' }), 'url'],
      [body({ url: 'http://example.com/' }), 'url'],
      [body({ url: 'https://10.1.2.3/' }), 'url'],
      [body({ description: 'x'.repeat(501) }), 'description'],
      [body({ enabled: 'yes' }), 'enabled'],
      [body({ colour: 'red' }), 'colour'],
    ];
    for (const [payload, field] of cases) {
      const reply = await post(payload);
      assertProblem(reply, 400);
      assert.ok(
        Object.keys(reply.body.errors ?? {}).some((k) => k === field || k.startsWith(`${field}.`)),
        `${JSON.stringify(payload).slice(0, 80)}: ${reply.raw}`,
      );
    }
    assertProblem(await as(owner).post(`/v3/users/${owner.id}/webhooks`, '[1,2', { 'content-type': 'application/json' }), 400);
    assertProblem(await as(owner).get('/v3/webhooks/abc'), 400);
    assertProblem(await as(owner).get('/v3/webhooks/0'), 400);
    assertProblem(await as(owner).get('/v3/webhooks/99999999999999999999'), 400);
    assertProblem(await as(owner).get('/v3/webhooks/987654'), 404);
    assertProblem(await as('admin').post('/v3/users/987654/webhooks', body()), 404);
    const { body: endpoint } = await post(body());
    assertProblem(await as(owner).put(`/v3/webhooks/${endpoint.id}`, { url: 'ftp://x' }), 400);
    assertProblem(await as(owner).put(`/v3/webhooks/${endpoint.id}`, { secret: 'whsec_mine' }), 400);
    assertProblem(await as(owner).get(`/v3/webhooks/${endpoint.id}/deliveries?state=exploded`), 400);
  });

  test('the access rule: owner and Team Administrator yes, another team no, no key 401', async () => {
    const { body: endpoint } = await as(owner).post(`/v3/users/${owner.id}/webhooks`, body());
    const byTeamAdmin = await as(teamAdmin).post(`/v3/users/${owner.id}/webhooks`, body());
    assert.equal(byTeamAdmin.status, 201, 'a Team Administrator registers for a teammate');
    assert.equal((await as(teamAdmin).get(`/v3/webhooks/${endpoint.id}`)).status, 200);
    assert.equal((await as('admin').get(`/v3/webhooks/${endpoint.id}`)).status, 200);
    for (const [method, path] of [
      ['GET', `/v3/webhooks/${endpoint.id}`],
      ['PUT', `/v3/webhooks/${endpoint.id}`],
      ['DELETE', `/v3/webhooks/${endpoint.id}`],
      ['POST', `/v3/webhooks/${endpoint.id}/rotate`],
      ['POST', `/v3/webhooks/${endpoint.id}/test`],
      ['GET', `/v3/webhooks/${endpoint.id}/deliveries`],
      ['GET', `/v3/users/${owner.id}/webhooks`],
      ['POST', `/v3/users/${owner.id}/webhooks`],
    ] as const) {
      const payload = method === 'PUT' ? { enabled: false } : method === 'POST' && path.endsWith('webhooks') ? body() : undefined;
      const reply = await as(stranger).send(method, path, payload);
      assert.ok([403, 404].includes(reply.status), `${method} ${path}: ${reply.status}`);
      assert.equal((await asKey(t.app, undefined).send(method, path, payload)).status, 401, `${method} ${path} without a key`);
    }
    const still = await as(owner).get(`/v3/webhooks/${endpoint.id}`);
    assert.equal(still.body.enabled, true, 'nothing changed');
  });

  test('rotation keeps the old secret for 24 hours', async () => {
    const { body: endpoint } = await as(owner).post(`/v3/users/${owner.id}/webhooks`, body());
    const rotated = await as(owner).post(`/v3/webhooks/${endpoint.id}/rotate`);
    assert.equal(rotated.status, 200, rotated.raw);
    const overlap = Date.parse(rotated.body.previous_secret_expires_at) - Date.parse(rotated.body.updated_at);
    assert.ok(Math.abs(overlap - 86_400_000) <= 1000, String(overlap));
    const row = await t.database.db.selectFrom('webhook_endpoints').selectAll().where('id', '=', endpoint.id).executeTakeFirstOrThrow();
    assert.equal(row.previous_secret, endpoint.secret);
    assert.equal(row.secret, rotated.body.secret);
  });

  test('a test event on a disabled endpoint is refused', async () => {
    const { body: endpoint } = await as(owner).post(`/v3/users/${owner.id}/webhooks`, body({ enabled: false }));
    assertProblem(await as(owner).post(`/v3/webhooks/${endpoint.id}/test`), 400);
  });
});
