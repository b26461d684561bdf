import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../clients/typescript/src/index.ts';
import { loadConfig } from '../../src/config.ts';
import { retryAfterMs } from '../../src/net/retry-after.ts';
import { type SendingApp, startSendingApp } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { type EventContract, eventContract } from './support/contract.ts';
import { type Receiver, startReceiver } from './support/receiver.ts';

/**
 * What a receiver's answer means beyond success (docs/webhooks.md, "Delivery and retries"): 410
 * Gone disables at once and tells the user's other endpoints and the user; Retry-After pauses the
 * endpoint; enabling it again sends what was pending.
 */
describe('410 Gone, Retry-After, enabling again', () => {
  let gone: Receiver;
  let other: Receiver;
  let s: SendingApp;
  let contract: EventContract;

  before(async () => {
    gone = await startReceiver();
    other = await startReceiver();
    s = await startSendingApp({
      WEBHOOK_ALLOW_PRIVATE: 'true',
      // Both receivers share one certificate (support/receiver.ts).
      WEBHOOK_CA_FILE: gone.caFile,
      WEBHOOK_RETRY_BASE: '100ms',
      WEBHOOK_POLL_INTERVAL: '50ms',
    });
    contract = await eventContract(s.t.app);
  });
  after(async () => {
    for (const request of [...(gone?.received ?? []), ...(other?.received ?? [])]) contract.check(request.body);
    await s?.close();
    await gone?.close();
    await other?.close();
  });

  const register = async (receiver: Receiver, events: string[]) => {
    const reply = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url: receiver.url, events });
    assert.equal(reply.status, 201, reply.raw);
    return reply.body as { id: number; secret: string };
  };

  test('a 410 disables the endpoint at once; endpoint.disabled reaches the other endpoint; the owner is emailed; enabling resends', async () => {
    gone.respond = () => 410;
    const doomed = await register(gone, ['contact.created']);
    const listening = await register(other, ['contact.unsubscribed']);
    const mailsBefore = s.sink.messages.length;
    const contact = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'gone@example.com' });
    assert.equal(contact.status, 201, contact.raw);

    const disabled = await waitFor('the endpoint disabled', async () => {
      const reply = await s.api.get(`/v3/webhooks/${doomed.id}`);
      return reply.body.enabled === false && reply.body;
    });
    assert.match(disabled.disabled_reason, /^Disabled at once: the endpoint answered 410 Gone at \d{4}-/);

    // The other endpoint, subscribed to something else, hears of it, signed with its own secret.
    const notice = await waitFor('endpoint.disabled at the other endpoint', () => other.received[0]);
    const event = verifyWebhook(listening.secret, notice.body, notice.headers);
    assert.equal(event.type, 'endpoint.disabled');
    assert.equal(event.user_id, s.owner);
    const data = event.data as { id: number; enabled: boolean; url: string; disabled_reason: string };
    assert.equal(data.id, doomed.id);
    assert.equal(data.enabled, false);
    assert.equal(data.url, gone.url);
    assert.equal(data.disabled_reason, disabled.disabled_reason);
    assert.ok(!('secret' in data), 'never the secret');

    // The owner gets an email saying why and how to enable it again.
    const owner = await s.api.get(`/v3/users/${s.owner}`);
    const mail = await waitFor('the email to the owner', () =>
      s.sink.messages.slice(mailsBefore).find((m) => m.to.includes(owner.body.email)),
    );
    assert.match(mail.raw, /Subject: Webhook endpoint disabled: https:\/\/localhost/);
    assert.match(mail.raw, /410 Gone/);

    // Not retried like a 500 (which, with a 100 ms backoff, would have been tried again by now).
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.equal(gone.received.length, 1);
    const [pending] = (await s.api.get(`/v3/webhooks/${doomed.id}/deliveries`)).body.data;
    assert.equal(pending.state, 'pending', 'kept for when it is enabled again');
    assert.equal(pending.response_status, 410);

    // The receiver is back: enabling the endpoint sends what was pending, at once.
    gone.respond = () => 200;
    const enabled = await s.api.put(`/v3/webhooks/${doomed.id}`, { enabled: true });
    assert.equal(enabled.status, 200, enabled.raw);
    assert.equal(enabled.body.disabled_reason, null);
    const resent = await waitFor('the pending event', () => gone.received[1]);
    const created = verifyWebhook(doomed.secret, resent.body, resent.headers);
    assert.equal(created.type, 'contact.created');
    assert.equal((created.data as { id: number }).id, contact.body.id);
    assert.equal(resent.headers['webhook-id'], gone.received[0]?.headers['webhook-id']);
    await s.api.delete(`/v3/webhooks/${doomed.id}`);
    await s.api.delete(`/v3/webhooks/${listening.id}`);
  });

  test('429 with Retry-After pauses the endpoint until then; the retry comes no sooner', async () => {
    other.received.length = 0;
    other.respond = (_request, index) => (index === 0 ? { status: 429, headers: { 'retry-after': '2' } } : 200);
    const endpoint = await register(other, ['contact.created']);
    await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'slow-down@example.com' });
    const paused = await waitFor('the pause', async () => {
      const reply = await s.api.get(`/v3/webhooks/${endpoint.id}`);
      return reply.body.paused_until ? reply.body : undefined;
    });
    assert.equal(paused.enabled, true);
    // A second event meanwhile waits too.
    await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'slow-down-2@example.com' });
    await waitFor('both events delivered', () => other.received.length >= 3);
    const [first, ...later] = other.received;
    for (const request of later) {
      assert.ok(request.at - (first?.at ?? 0) >= 1_900, `a post ${request.at - (first?.at ?? 0)} ms after the 429`);
    }
    assert.equal(later[0]?.headers['webhook-id'], first?.headers['webhook-id']);
    const delivery = await waitFor('the answered delivery recorded', async () => {
      const listed = (await s.api.get(`/v3/webhooks/${endpoint.id}/deliveries?per_page=100`)).body.data;
      const found = listed.find((d: { webhook_id: string }) => d.webhook_id === first?.headers['webhook-id']);
      return found?.attempt_log.length === 2 ? found : undefined;
    });
    assert.deepEqual(
      delivery.attempt_log.map((a: { response_status: number }) => a.response_status),
      [429, 200],
    );
    await s.api.delete(`/v3/webhooks/${endpoint.id}`);
  });

  test('Retry-After is read as seconds or an HTTP date; the timeout is 15 s unless set', () => {
    assert.equal(retryAfterMs('120'), 120_000);
    const now = Date.parse('2026-07-12T16:56:00Z');
    assert.equal(retryAfterMs('Sun, 12 Jul 2026 16:57:00 GMT', now), 60_000);
    assert.equal(retryAfterMs('Sun, 12 Jul 2026 16:00:00 GMT', now), 0);
    assert.equal(retryAfterMs('soon'), null);
    assert.equal(retryAfterMs(undefined), null);
    assert.equal(loadConfig({ DATA_DIR: '/tmp/hopper-config', PUBLIC_URL: 'https://localhost:8443' }).webhooks.timeoutMs, 15_000);
  });
});
