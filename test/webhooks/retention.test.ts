import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { type Receiver, startReceiver } from './support/receiver.ts';

/**
 * WEBHOOK_RETENTION: the worker's periodic sweep deletes old events with their deliveries and
 * attempts, and keeps what is still due to an enabled endpoint however old it is.
 */
describe('webhook history retention', () => {
  let t: TestApp;
  let receiver: Receiver;
  before(async () => {
    receiver = await startReceiver();
    t = await startTestApp({
      workers: true,
      env: {
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_CA_FILE: receiver.caFile,
        WEBHOOK_POLL_INTERVAL: '50ms',
        WEBHOOK_RETRY_BASE: '1h',
        WEBHOOK_RETENTION: '2s',
      },
    });
  });
  after(async () => {
    await t?.close();
    await receiver?.close();
  });

  test('delivered events go after the retention period with their attempts; a delivery still due stays', async () => {
    const api = asKey(t.app, t.adminKey);
    const { db } = t.database;
    const created = await api.post(`/v3/users/${t.adminId}/webhooks`, { url: receiver.url, events: ['contact.created'] });
    assert.equal(created.status, 201, created.raw);
    const endpoint = created.body.id;
    await api.post(`/v3/users/${t.adminId}/contacts`, { email: 'kept-a-while@example.com' });
    const delivered = await waitFor('the delivery', async () => {
      const reply = await api.get(`/v3/webhooks/${endpoint}/deliveries`);
      return reply.body.data[0]?.state === 'delivered' && reply.body.data[0];
    });
    assert.equal(delivered.attempt_log.length, 1);

    // The receiver goes down: the next event fails once and waits an hour for its retry.
    await receiver.down();
    await api.post(`/v3/users/${t.adminId}/contacts`, { email: 'still-due@example.com' });
    await waitFor('a failed attempt', async () => {
      const reply = await api.get(`/v3/webhooks/${endpoint}/deliveries`);
      return reply.body.data.find((d: { state: string; attempts: number }) => d.state === 'pending' && d.attempts === 1);
    });

    // Past the retention period the sweep deletes the delivered event, its delivery and its attempt.
    const left = await waitFor('the sweep', async () => {
      const reply = await api.get(`/v3/webhooks/${endpoint}/deliveries`);
      return reply.body.data.length === 1 && reply.body.data;
    });
    assert.equal(left[0].state, 'pending', 'the delivery still due is kept');
    assert.equal(left[0].attempt_log.length, 1);
    const counts = await db
      .selectFrom('webhook_events')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(counts.n), 1);
    const attempts = await db
      .selectFrom('webhook_attempts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(attempts.n), 1);

    // Once the endpoint is disabled, nothing is due any more: the old event goes too.
    await api.put(`/v3/webhooks/${endpoint}`, { enabled: false });
    await waitFor('the second sweep', async () => {
      const reply = await api.get(`/v3/webhooks/${endpoint}/deliveries`);
      return reply.body.data.length === 0;
    });
  });
});
