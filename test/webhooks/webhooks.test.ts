import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { sign } from '../../src/webhooks/signing.ts';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { eventContract } from './support/contract.ts';
import { type Receiver, startReceiver } from './support/receiver.ts';

/**
 * Outbound webhooks end to end (docs/webhooks.md): the sending engine in-process, a real HTTPS
 * receiver on loopback, every signature checked with the Standard Webhooks library's verifier.
 */

describe('Standard Webhooks signature', () => {
  test('matches the specification’s published test vector', () => {
    // https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const signature = sign(secret, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    assert.equal(signature, 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });
});

describe('webhooks to a real HTTPS receiver', () => {
  let receiver: Receiver;
  let s: SendingApp;

  before(async () => {
    receiver = await startReceiver();
    s = await startSendingApp({
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_CA_FILE: receiver.caFile,
      WEBHOOK_RETRY_BASE: '100ms',
      WEBHOOK_POLL_INTERVAL: '50ms',
    });
  });
  after(async () => {
    // Every body received here is valid for its type in the OpenAPI document's `webhooks`.
    if (s && receiver) {
      const contract = await eventContract(s.t.app);
      for (const request of receiver.received) contract.check(request.body);
    }
    await s?.close();
    await receiver?.close();
  });

  const register = async (events: string[], url = receiver.url) => {
    const reply = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url, events, description: 'CRM sync' });
    assert.equal(reply.status, 201, reply.raw);
    assert.match(reply.body.secret, /^whsec_[A-Za-z0-9+/=]{40,}$/);
    return reply.body as { id: number; secret: string };
  };
  const bodies = (since: number) => receiver.received.slice(since).map((r) => JSON.parse(r.body));

  test('an email to 3 contacts: sending, sent and one delivery.sent per contact, each signature valid', async () => {
    const endpoint = await register(['templated_email.sending', 'templated_email.sent', 'delivery.sent']);
    const since = receiver.received.length;
    const people = await audience(s, 3);
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    await waitForStatus(s, email.id, ['Sent']);
    await waitFor('5 events', () => receiver.received.length - since >= 5);
    const got = receiver.received.slice(since);
    const verifier = new Webhook(endpoint.secret);
    for (const request of got) verifier.verify(request.body, request.headers);
    const events = bodies(since);
    const types = events.map((e) => e.type).sort();
    assert.deepEqual(types, ['delivery.sent', 'delivery.sent', 'delivery.sent', 'templated_email.sending', 'templated_email.sent']);
    const sending = events.find((e) => e.type === 'templated_email.sending');
    assert.equal(sending.data.id, email.id);
    assert.equal(sending.data.status, 'Sending');
    assert.match(sending.timestamp, /^\d{4}-\d{2}-\d{2}T/);
    const contacts = events.filter((e) => e.type === 'delivery.sent').map((e) => e.data.contact_id);
    assert.deepEqual(contacts.sort(), people.contacts.map((c) => c.id).sort());
    for (const e of events.filter((x) => x.type === 'delivery.sent')) {
      assert.equal(e.data.state, 'sent');
      assert.equal(e.data.message_id, email.id);
      assert.equal(e.data.message_kind, 'templated_email');
    }
    // Every delivery is listed as delivered on its first attempt (outcomes are recorded in batches,
    // a few milliseconds after the answers).
    const listed = await waitFor('5 deliveries recorded', async () => {
      const reply = await s.api.get(`/v3/webhooks/${endpoint.id}/deliveries?per_page=100`);
      assert.equal(reply.status, 200, reply.raw);
      return reply.body.data.every((d: { state: string }) => d.state === 'delivered') && reply;
    });
    assert.equal(listed.body.data.length, 5);
    for (const d of listed.body.data) {
      assert.equal(d.state, 'delivered');
      assert.equal(d.attempt_log.length, 1);
      assert.equal(d.attempt_log[0].response_status, 200);
    }
    await s.api.delete(`/v3/webhooks/${endpoint.id}`);
  });

  test('a receiver answering 500 three times, then 200: delivered on the fourth attempt, every attempt listed', async () => {
    const endpoint = await register(['contact.created']);
    const since = receiver.received.length;
    receiver.respond = (_request, index) => (index - since < 3 ? 500 : 200);
    try {
      const contact = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'retry@example.com' });
      assert.equal(contact.status, 201, contact.raw);
      const listed = await waitFor('delivery after retries', async () => {
        const reply = await s.api.get(`/v3/webhooks/${endpoint.id}/deliveries`);
        return reply.body.data[0]?.state === 'delivered' && reply.body;
      });
      const [delivery] = listed.data;
      assert.equal(delivery.attempts, 4);
      assert.deepEqual(
        delivery.attempt_log.map((a: { response_status: number }) => a.response_status),
        [500, 500, 500, 200],
      );
      for (const a of delivery.attempt_log.slice(0, 3)) assert.ok(a.next_retry_at, 'a failed attempt names its retry');
      assert.equal(delivery.attempt_log[3].next_retry_at, null);
      const got = receiver.received.slice(since);
      assert.equal(got.length, 4);
      // The same event every time: the same id and body.
      assert.equal(new Set(got.map((r) => r.headers['webhook-id'])).size, 1);
      assert.equal(new Set(got.map((r) => r.body)).size, 1);
      assert.equal(JSON.parse(got[0]?.body ?? '').data.id, contact.body.id);
      for (const r of got) new Webhook(endpoint.secret).verify(r.body, r.headers);
    } finally {
      receiver.respond = () => 200;
      await s.api.delete(`/v3/webhooks/${endpoint.id}`);
    }
  });

  test('rotation: during the overlap both secrets sign, each verifiable on its own', async () => {
    const endpoint = await register(['contact.created']);
    const rotated = await s.api.post(`/v3/webhooks/${endpoint.id}/rotate`);
    assert.equal(rotated.status, 200, rotated.raw);
    assert.notEqual(rotated.body.secret, endpoint.secret);
    assert.ok(rotated.body.previous_secret_expires_at);
    const since = receiver.received.length;
    await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'rotate@example.com' });
    await waitFor('the event', () => receiver.received.length > since);
    const request = receiver.received[since] as { body: string; headers: Record<string, string> };
    assert.equal(request.headers['webhook-signature']?.split(' ').length, 2);
    new Webhook(rotated.body.secret).verify(request.body, request.headers);
    new Webhook(endpoint.secret).verify(request.body, request.headers);
    await s.api.delete(`/v3/webhooks/${endpoint.id}`);
  });

  test('webhook.test reaches the endpoint', async () => {
    const endpoint = await register(['contact.deleted']);
    const since = receiver.received.length;
    const reply = await s.api.post(`/v3/webhooks/${endpoint.id}/test`);
    assert.equal(reply.status, 202, reply.raw);
    await waitFor('the test event', () => receiver.received.length > since);
    assert.equal(bodies(since)[0].type, 'webhook.test');
    await s.api.delete(`/v3/webhooks/${endpoint.id}`);
  });

  test('a user without endpoints gets no events stored', async () => {
    const { rows } = await s.t.database.db
      .selectFrom('webhook_events')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .execute()
      .then((r) => ({ rows: r }));
    const before = Number(rows[0]?.n);
    await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'quiet@example.com' });
    const now = await s.t.database.db
      .selectFrom('webhook_events')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirst();
    assert.equal(Number(now?.n), before);
  });

  test('contact events, one statement at a time: created, updated, status_changed, unsubscribed, deleted, and a bulk import', async () => {
    const endpoint = await register([
      'contact.created',
      'contact.updated',
      'contact.status_changed',
      'contact.unsubscribed',
      'contact.deleted',
    ]);
    const db = s.t.database.db;
    const last = await db
      .selectFrom('webhook_events')
      .select((eb) => eb.fn.max('id').as('id'))
      .executeTakeFirst();
    const since = Number(last?.id ?? 0);
    const contact = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'events@example.com' });
    assert.equal(contact.status, 201, contact.raw);
    assert.equal((await s.api.put(`/v3/contacts/${contact.body.id}`, { first_name: 'Eve' })).status, 200);
    assert.equal((await s.api.put(`/v3/contacts/${contact.body.id}`, { status: 'Unsubscribed' })).status, 200);
    assert.equal((await s.api.delete(`/v3/contacts/${contact.body.id}`)).status, 200);
    const imported = await s.api.post(
      `/v3/users/${s.owner}/contacts/import`,
      'email,first_name\nbulk1@example.com,One\nbulk2@example.com,Two\n',
      {
        'content-type': 'text/csv',
      },
    );
    assert.equal(imported.status, 200, imported.raw);
    const events = await db
      .selectFrom('webhook_events')
      .select(['id', 'type', 'resource_id', 'snapshot'])
      .where('id', '>', since)
      .where('user_id', '=', s.owner)
      .orderBy('id')
      .execute();
    const snapshot = (i: number) => events[i]?.snapshot as Record<string, unknown>;
    assert.deepEqual(
      events.map((e) => e.type),
      [
        'contact.created',
        'contact.updated',
        'contact.updated',
        'contact.status_changed',
        'contact.unsubscribed',
        'contact.deleted',
        'contact.created',
        'contact.created',
      ],
    );
    assert.equal(snapshot(1).first_name, 'Eve');
    assert.equal(snapshot(3).previous_status, 'Subscribed');
    assert.equal(snapshot(3).status, 'Unsubscribed');
    assert.ok(snapshot(5).deleted_at);
    assert.deepEqual(
      events.slice(6).map((e) => (e.snapshot as { email: string }).email),
      ['bulk1@example.com', 'bulk2@example.com'],
    );
    // Each event has its delivery to the endpoint.
    const deliveries = await db
      .selectFrom('webhook_deliveries')
      .select('event_id')
      .where('endpoint_id', '=', endpoint.id)
      .where('event_id', '>', since)
      .execute();
    assert.equal(deliveries.length, events.length);
    await s.api.delete(`/v3/webhooks/${endpoint.id}`);
  });

  test('a rolled-back change leaves no event', async () => {
    const endpoint = await register(['contact.created']);
    const db = s.t.database.db;
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await trx
          .insertInto('contacts')
          .values({ user_id: s.owner, email: 'ghost@example.com', created_at: new Date(), updated_at: new Date() })
          .execute();
        throw new Error('rolled back');
      }),
    );
    const events = await db.selectFrom('webhook_events').select('snapshot').where('type', '=', 'contact.created').execute();
    assert.ok(!events.some((e) => (e.snapshot as { email: string }).email === 'ghost@example.com'));
    await s.api.delete(`/v3/webhooks/${endpoint.id}`);
  });
});

describe('webhook target rules', () => {
  let s: SendingApp;
  let receiver: Receiver;
  before(async () => {
    receiver = await startReceiver();
    s = await startSendingApp({ WEBHOOK_CA_FILE: receiver.caFile, WEBHOOK_POLL_INTERVAL: '50ms', WEBHOOK_RETRY_BASE: '10s' });
  });
  after(async () => {
    await s?.close();
    await receiver?.close();
  });

  test('http:// and private addresses are refused when saved', async () => {
    for (const url of [
      'http://example.com/hook',
      'https://127.0.0.1/hook',
      'https://[::1]/x',
      'https://169.254.169.254/x',
      'https://localhost/x',
      'ftp://example.com',
    ]) {
      const reply = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url, events: ['contact.created'] });
      assert.equal(reply.status, 400, `${url}: ${reply.raw}`);
      assert.ok(reply.body.errors.url, url);
    }
  });

  test('a name resolving to a private address is refused at delivery time (after DNS), and nothing reaches it', async () => {
    // The machine's own name passes the save-time check (it is a name) and resolves, through the
    // system resolver, to a loopback or private address: the check after resolution refuses it.
    const url = `https://${hostname()}:${receiver.port}/hooks`;
    const created = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url, events: ['contact.created'] });
    assert.equal(created.status, 201, created.raw);
    await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'private@example.com' });
    const listed = await waitFor('a refused attempt', async () => {
      const reply = await asKey(s.t.app, s.t.adminKey).get(`/v3/webhooks/${created.body.id}/deliveries`);
      return reply.body.data[0]?.last_error ? reply.body.data[0] : undefined;
    });
    assert.equal(listed.state, 'pending', 'refused like any failure: retried later');
    assert.match(listed.last_error, /refused: .* resolves to .*private, loopback or link-local/);
    assert.equal(receiver.received.length, 0);
  });
});

describe('an endpoint failing for 3 days', () => {
  let t: TestApp;
  let receiver: Receiver;
  let offset = 0;
  before(async () => {
    receiver = await startReceiver();
    receiver.respond = () => 503;
    t = await startTestApp({
      workers: true,
      clock: () => new Date(Date.now() + offset),
      env: { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_CA_FILE: receiver.caFile, WEBHOOK_RETRY_BASE: '100ms', WEBHOOK_POLL_INTERVAL: '50ms' },
    });
  });
  after(async () => {
    await t?.close();
    await receiver?.close();
  });

  test('is disabled with the reason visible to its owner; its delivery is given up', async () => {
    const api = asKey(t.app, t.adminKey);
    const created = await api.post(`/v3/users/${t.adminId}/webhooks`, { url: receiver.url, events: ['contact.created'] });
    assert.equal(created.status, 201, created.raw);
    await api.post(`/v3/users/${t.adminId}/contacts`, { email: 'late@example.com' });
    const failing = await waitFor('the first failure', async () => {
      const reply = await api.get(`/v3/webhooks/${created.body.id}`);
      return reply.body.failing_since ? reply.body : undefined;
    });
    assert.equal(failing.enabled, true, 'a day of failures does not disable it');
    offset = 3 * 86_400_000 + 60_000;
    const disabled = await waitFor('the endpoint to be disabled', async () => {
      const reply = await api.get(`/v3/webhooks/${created.body.id}`);
      return reply.body.enabled === false ? reply.body : undefined;
    });
    assert.match(disabled.disabled_reason, /^Disabled after failing since \d{4}-.*; last error: HTTP 503/);
    // An attempt already in flight when the endpoint was disabled is recorded (given up) just after.
    const given = await waitFor('the delivery to be given up', async () => {
      const reply = await api.get(`/v3/webhooks/${created.body.id}/deliveries`);
      return reply.body.data[0]?.state === 'failed' && reply.body.data[0];
    });
    assert.equal(given.next_retry_at, null);
  });
});
