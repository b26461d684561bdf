import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../clients/typescript/src/index.ts';
import { type SendingApp, startSendingApp } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { createUser } from '../support/factories.ts';
import { type EventContract, eventContract } from './support/contract.ts';
import { type Receiver, startReceiver } from './support/receiver.ts';

/**
 * Recovery (docs/webhooks.md, "Recovery"): a user's past events listed, one delivery read with its
 * attempts and body, events sent again — one, or every one since a time after the receiver's outage.
 */
describe('webhook recovery', () => {
  let receiver: Receiver;
  let s: SendingApp;
  let contract: EventContract;

  before(async () => {
    receiver = await startReceiver();
    s = await startSendingApp({
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_CA_FILE: receiver.caFile,
      // Retries far away: only a resend brings the events back within the test.
      WEBHOOK_RETRY_BASE: '1h',
      WEBHOOK_POLL_INTERVAL: '50ms',
    });
    contract = await eventContract(s.t.app);
  });
  after(async () => {
    for (const request of receiver?.received ?? []) contract.check(request.body);
    await s?.close();
    await receiver?.close();
  });

  const deliveries = async (endpointId: number) => {
    const reply = await s.api.get(`/v3/webhooks/${endpointId}/deliveries?per_page=100`);
    assert.equal(reply.status, 200, reply.raw);
    return reply.body.data as { id: number; state: string; attempts: number; webhook_id: string; last_error: string | null }[];
  };

  test('an outage of the receiver, recovered by "resend since"', async () => {
    const created = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url: receiver.url, events: ['contact.created'] });
    assert.equal(created.status, 201, created.raw);
    const endpoint = created.body as { id: number; secret: string };
    await receiver.down();
    const since = new Date();
    const emails = Array.from({ length: 5 }, (_, i) => `outage${i}@example.com`);
    for (const email of emails) assert.equal((await s.api.post(`/v3/users/${s.owner}/contacts`, { email })).status, 201);
    // Each delivery fails once (connection refused) and waits for a retry an hour away.
    await waitFor('5 failed attempts', async () => {
      const listed = await deliveries(endpoint.id);
      return listed.length === 5 && listed.every((d) => d.state === 'pending' && d.attempts === 1 && d.last_error) && listed;
    });
    assert.equal(receiver.received.length, 0);

    await receiver.up();
    const resent = await s.api.post(`/v3/webhooks/${endpoint.id}/resend`, { since: since.toISOString() });
    assert.equal(resent.status, 202, resent.raw);
    assert.deepEqual(resent.body, { queued: 5, next_since: null, next_after_event_id: null });
    const got = await waitFor('the 5 events', () => receiver.received.length >= 5 && receiver.received);
    const bodies = got.map((r) => verifyWebhook(endpoint.secret, r.body, r.headers));
    assert.deepEqual(bodies.map((e) => (e.data as { email: string }).email).sort(), emails);
    const listed = await waitFor('5 delivered', async () => {
      const all = await deliveries(endpoint.id);
      return all.every((d) => d.state === 'delivered') && all;
    });
    for (const d of listed) assert.equal(d.attempts, 2);
    // The same webhook-id as the failed attempts: a receiver deduplicates on it.
    assert.deepEqual(new Set(got.map((r) => r.headers['webhook-id'])), new Set(listed.map((d) => d.webhook_id)));

    // One delivery read alone: its two attempts and the exact body it posts.
    const one = listed[0] as { id: number; webhook_id: string };
    const detail = await s.api.get(`/v3/webhooks/${endpoint.id}/deliveries/${one.id}`);
    assert.equal(detail.status, 200, detail.raw);
    assert.equal(detail.body.attempt_log.length, 2);
    assert.equal(detail.body.attempt_log[0].response_status, null);
    assert.ok(detail.body.attempt_log[0].error);
    assert.equal(detail.body.attempt_log[1].response_status, 200);
    assert.equal(detail.body.request.url, receiver.url);
    const posted = got.find((r) => r.headers['webhook-id'] === one.webhook_id);
    assert.equal(detail.body.request.body, posted?.body);

    // One event again, by its id.
    const again = await s.api.post(`/v3/webhooks/${endpoint.id}/resend`, { event_id: detail.body.event_id });
    assert.equal(again.status, 202, again.raw);
    assert.equal(again.body.queued, 1);
    await waitFor('the event once more', () => receiver.received.length >= 6);
    assert.equal(receiver.received[5]?.headers['webhook-id'], one.webhook_id);
    await s.api.delete(`/v3/webhooks/${endpoint.id}`);
  });

  test("the user's events, filtered by type and time, paged, with their bodies", async () => {
    const created = await s.api.post(`/v3/users/${s.owner}/webhooks`, {
      url: receiver.url,
      events: ['contact.created', 'contact.updated'],
    });
    const start = new Date();
    const contact = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'listed@example.com' });
    await s.api.put(`/v3/contacts/${contact.body.id}`, { first_name: 'Listed' });
    const end = new Date(Date.now() + 1);
    const window = `since=${encodeURIComponent(start.toISOString())}&until=${encodeURIComponent(end.toISOString())}`;
    const all = await s.api.get(`/v3/users/${s.owner}/webhook_events?${window}`);
    assert.equal(all.status, 200, all.raw);
    assert.deepEqual(
      all.body.data.map((e: { type: string }) => e.type),
      ['contact.created', 'contact.updated'],
    );
    for (const e of all.body.data) {
      contract.check(e.payload);
      assert.equal(e.payload.data.id, contact.body.id);
      assert.match(e.webhook_id, /^msg_[0-9a-f]{32}$/);
    }
    const updated = await s.api.get(`/v3/users/${s.owner}/webhook_events?type=contact.updated&${window}`);
    assert.deepEqual(
      updated.body.data.map((e: { type: string }) => e.type),
      ['contact.updated'],
    );
    assert.equal(updated.body.data[0].payload.data.first_name, 'Listed');
    const paged = await s.api.get(`/v3/users/${s.owner}/webhook_events?per_page=1&${window}`);
    assert.equal(paged.body.meta.total, 2);
    assert.equal(paged.body.data.length, 1);
    assert.ok(paged.body.links.next);
    const later = await s.api.get(`/v3/users/${s.owner}/webhook_events?since=${encodeURIComponent(end.toISOString())}`);
    assert.equal(later.body.data.length, 0);
    await s.api.delete(`/v3/webhooks/${created.body.id}`);
  });

  test('bad requests are 4xx problems: wrong types, missing and unknown fields, huge values, foreign ids', async () => {
    const created = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url: receiver.url, events: ['contact.created'] });
    const id = created.body.id;
    const bad: [string, unknown][] = [
      ['neither', {}],
      ['both', { event_id: 1, since: '2026-01-01T00:00:00Z' }],
      ['until alone', { until: '2026-01-01T00:00:00Z' }],
      ['until before since', { since: '2026-01-02T00:00:00Z', until: '2026-01-01T00:00:00Z' }],
      ['since not a time', { since: 'yesterday' }],
      ['since a number', { since: 5 }],
      ['event_id a string', { event_id: 'one' }],
      ['event_id huge', { event_id: 2 ** 60 }],
      ['event_id zero', { event_id: 0 }],
      ['unknown field', { since: '2026-01-01T00:00:00Z', everything: true }],
      ['since huge', { since: 'x'.repeat(100_000) }],
    ];
    for (const [what, body] of bad) {
      const reply = await s.api.post(`/v3/webhooks/${id}/resend`, body);
      assert.equal(reply.status, 400, `${what}: ${reply.raw}`);
      assert.match(String(reply.headers['content-type']), /application\/problem\+json/);
    }
    assert.equal((await s.api.post(`/v3/webhooks/${id}/resend`, { event_id: 9_000_000 })).status, 404);
    assert.equal((await s.api.post('/v3/webhooks/9000000/resend', { since: '2026-01-01T00:00:00Z' })).status, 404);
    assert.equal((await s.api.get(`/v3/webhooks/${id}/deliveries/9000000`)).status, 404);
    assert.equal((await s.api.get(`/v3/webhooks/${id}/deliveries/abc`)).status, 400);
    for (const query of ['type=contact.nope', 'since=soon', 'until=5x', 'per_page=1000', 'colour=red', `since=${'9'.repeat(5000)}`]) {
      const reply = await s.api.get(`/v3/users/${s.owner}/webhook_events?${query}`);
      assert.equal(reply.status, 400, `${query}: ${reply.raw}`);
    }

    // Another user's endpoint, deliveries and events are out of reach; their events are not resent to mine.
    const other = await createUser(s.t, 'User');
    const otherApi = asKey(s.t.app, other.key);
    const theirs = await otherApi.post(`/v3/users/${other.id}/webhooks`, { url: receiver.url, events: ['contact.created'] });
    assert.equal(theirs.status, 201, theirs.raw);
    await otherApi.post(`/v3/users/${other.id}/contacts`, { email: 'theirs@example.com' });
    const theirEvents = await otherApi.get(`/v3/users/${other.id}/webhook_events`);
    assert.equal(theirEvents.status, 200, theirEvents.raw);
    const theirEvent = theirEvents.body.data[0];
    assert.ok(theirEvent);
    assert.equal((await s.api.post(`/v3/webhooks/${id}/resend`, { event_id: theirEvent.id })).status, 404);
    // Someone else's endpoint is forbidden (the project's one access rule), as are its deliveries.
    assert.equal((await otherApi.post(`/v3/webhooks/${id}/resend`, { since: '2026-01-01T00:00:00Z' })).status, 403);
    assert.equal((await otherApi.get(`/v3/users/${s.owner}/webhook_events`)).status, 403);
    assert.equal((await otherApi.get(`/v3/webhooks/${id}/deliveries/1`)).status, 403);
    await s.api.delete(`/v3/webhooks/${id}`);
  });
});
