import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

describe('cancelled accounts with GRACE_PERIOD=2s', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { GRACE_PERIOD: '2s' } });
  });
  after(() => t.close());

  test('reads and deletes work during the grace period, other writes get 403; after it, everything gets 403', async () => {
    const owner = await createUser(t, 'User');
    const spare = await asKey(t.app, owner.key).post(`/v3/users/${owner.id}/api_keys`, { name: 'spare' });
    const client = asKey(t.app, owner.key);

    const cancelled = await client.post(`/v3/users/${owner.id}/cancel`);
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.status, 'Cancelled');
    const graceEnds = Date.parse(cancelled.body.cancelled_at) + 2000;

    assert.equal((await client.get(`/v3/users/${owner.id}`)).status, 200, 'reads work');
    assert.equal((await client.get(`/v3/users/${owner.id}/api_keys`)).status, 200);
    const write = await client.put(`/v3/users/${owner.id}`, { first_name: 'Again' });
    assertProblem(write, 403, 'account_cancelled');
    assert.match(write.body.detail, /read-only until \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z/);
    assertProblem(await client.post(`/v3/users/${owner.id}/api_keys`, { name: 'more' }), 403, 'account_cancelled');
    assert.equal((await client.delete(`/v3/api_keys/${spare.body.id}`)).status, 200, 'deletes work');

    // Wait for the period to pass: poll the state the rule depends on, with a deadline.
    const deadline = Date.now() + 10_000;
    let reply = await client.get(`/v3/users/${owner.id}`);
    while (reply.status === 200 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, Math.max(50, graceEnds - Date.now())));
      reply = await client.get(`/v3/users/${owner.id}`);
    }
    assert.ok(Date.now() >= graceEnds - 1000, 'the key kept working until the end of the period');
    assertProblem(reply, 403, 'account_cancelled');
    assert.match(reply.body.detail, /grace period ended at/);
    assertProblem(await client.delete(`/v3/api_keys/${spare.body.id}`), 403);
  });

  test('an Administrator still reaches a cancelled user', async () => {
    const owner = await createUser(t, 'User');
    await asKey(t.app, t.adminKey).post(`/v3/users/${owner.id}/cancel`);
    const read = await asKey(t.app, t.adminKey).get(`/v3/users/${owner.id}`);
    assert.equal(read.status, 200);
    assert.equal(read.body.status, 'Cancelled');
  });
});
