import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { recordDeliveryEvents } from '../../src/sending/delivery-events.ts';
import { postWebhook, type SentDelivery, sendEmail, sendgridEvent, sendgridKeyPair, signedHeaders } from '../sending/fixtures.ts';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** SendGrid's signed Event Webhook feeding the delivery ledger (docs/sendgrid.md). */
describe('SendGrid event webhook', () => {
  let t: TestApp;
  let owner: Actor;
  let privateKey: KeyObject;
  let message: { id: number; deliveries: SentDelivery[] };
  const logLines: string[] = [];

  before(async () => {
    const keys = sendgridKeyPair();
    privateKey = keys.privateKey;
    const logStream = new PassThrough();
    logStream.on('data', (chunk) => logLines.push(...String(chunk).split('\n').filter(Boolean)));
    t = await startTestApp({ workers: true, logStream, env: { SENDGRID_WEBHOOK_PUBLIC_KEY: keys.publicKeyBase64, LOG_LEVEL: 'info' } });
    owner = await createUser(t, 'User');
    message = await sendEmail(t, owner, 12);
  });
  after(() => t.close());

  const delivery = (n: number) => message.deliveries[n] as SentDelivery;
  const reporting = async () => (await asKey(t.app, owner.key).get(`/v3/templated_emails/${message.id}`)).body.reporting;
  const contactStatus = async (d: SentDelivery) => (await asKey(t.app, owner.key).get(`/v3/contacts/${d.contact_id}`)).body.status;
  const deliveryRow = async (d: SentDelivery) => {
    const listed = await asKey(t.app, owner.key).get(`/v3/templated_emails/${message.id}/deliveries?contact_id=${d.contact_id}`);
    return listed.body.data[0];
  };
  const storedEvents = async () => {
    const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM delivery_events`.execute(t.database.db);
    return Number(rows[0]?.n);
  };
  /** The counters as they are, so each test checks only what it moves. */
  async function expectChange(change: Record<string, number>, run: () => Promise<void>) {
    const before = await reporting();
    await run();
    const expected = { ...before };
    for (const [name, n] of Object.entries(change)) expected[name] += n;
    assert.deepEqual(await reporting(), expected);
  }

  test('the email really went out: one outbox file per delivery, each carrying its delivery id for SendGrid', async () => {
    const files = await readdir(join(t.dataDir, 'outbox'));
    assert.equal(files.filter((f) => f.endsWith('.eml')).length, 12);
    assert.equal((await reporting()).sent, 12);
    assert.ok(message.deliveries.every((d) => d.state === 'sent'));
  });

  test('a signed batch is accepted without an API key and moves counters, states and contacts', async () => {
    const batch = [
      sendgridEvent(delivery(0), 'processed'),
      sendgridEvent(delivery(0), 'delivered'),
      sendgridEvent(delivery(0), 'open'),
      sendgridEvent(delivery(0), 'open'),
      sendgridEvent(delivery(0), 'click', { url: 'https://example.com/listing' }),
      sendgridEvent(delivery(1), 'delivered'),
      sendgridEvent(delivery(1), 'deferred', { response: '450 mailbox busy', attempt: '1' }),
      sendgridEvent(delivery(2), 'bounce', { type: 'bounce', reason: '550 5.1.1 no such user' }),
      sendgridEvent(delivery(3), 'bounce', { type: 'blocked', reason: '554 blocked' }),
      sendgridEvent(delivery(4), 'spamreport'),
      sendgridEvent(delivery(5), 'unsubscribe'),
      sendgridEvent(delivery(6), 'group_unsubscribe', { asm_group_id: 1 }),
      sendgridEvent(delivery(7), 'dropped', { reason: 'Bounced Address' }),
    ];
    await expectChange(
      {
        processed: 1,
        delivered: 2,
        open: 2,
        click: 1,
        deferred: 1,
        bounce: 2,
        hard_bounce: 1,
        soft_bounce: 1,
        spamreport: 1,
        unsubscribe: 2,
        dropped: 1,
      },
      async () => {
        const reply = await postWebhook(t, privateKey, batch);
        assert.equal(reply.status, 200, reply.raw);
        assert.deepEqual(reply.body, { recorded: 13, duplicates: 0, ignored: 0 });
      },
    );
    assert.equal((await deliveryRow(delivery(0))).state, 'delivered');
    assert.match((await deliveryRow(delivery(0))).delivered_at, /Z$/);
    assert.equal((await deliveryRow(delivery(2))).state, 'bounced');
    assert.equal((await deliveryRow(delivery(3))).state, 'bounced');
    assert.equal((await deliveryRow(delivery(7))).state, 'dropped');
    assert.equal(await contactStatus(delivery(2)), 'Inactive - Hard Bounce');
    assert.equal(await contactStatus(delivery(3)), 'Subscribed', 'a block is about this message, not the address');
    assert.equal(await contactStatus(delivery(4)), 'Inactive - Spam Complaint');
    assert.equal(await contactStatus(delivery(5)), 'Unsubscribed');
    assert.equal(await contactStatus(delivery(6)), 'Unsubscribed');
    const { rows } = await sql<{ detail: string }>`SELECT detail FROM delivery_events WHERE type = 'click'`.execute(t.database.db);
    assert.deepEqual(rows, [{ detail: 'https://example.com/listing' }]);
  });

  test('a tampered body, a wrong key, a missing or stale signature: 403 and nothing changes', async () => {
    const batch = [sendgridEvent(delivery(8), 'delivered'), sendgridEvent(delivery(8), 'spamreport')];
    const body = JSON.stringify(batch);
    const stored = await storedEvents();
    await expectChange({}, async () => {
      const headers = signedHeaders(privateKey, body);
      const tampered = body.replace('spamreport', 'unsubscribe');
      assertProblem(await postWebhook(t, undefined, tampered, headers), 403, 'invalid_signature');

      const stranger = sendgridKeyPair().privateKey;
      assertProblem(await postWebhook(t, stranger, body), 403, 'invalid_signature');

      assertProblem(await postWebhook(t, undefined, body), 403, 'invalid_signature');
      const signatureOnly = { 'x-twilio-email-event-webhook-signature': headers['x-twilio-email-event-webhook-signature'] };
      assertProblem(await postWebhook(t, undefined, body, signatureOnly), 403, 'invalid_signature');
      assertProblem(
        await postWebhook(t, undefined, body, { ...headers, 'x-twilio-email-event-webhook-signature': 'not-a-signature' }),
        403,
        'invalid_signature',
      );
      // The timestamp is signed too: another one breaks the signature, and an old signed one is stale.
      const later = String(Number(headers['x-twilio-email-event-webhook-timestamp']) + 1);
      assertProblem(await postWebhook(t, undefined, body, { ...headers, 'x-twilio-email-event-webhook-timestamp': later }), 403);
      const stale = signedHeaders(privateKey, body, Math.floor(Date.now() / 1000) - 11 * 60);
      const reply = await postWebhook(t, undefined, body, stale);
      assertProblem(reply, 403, 'invalid_signature');
      assert.match(reply.body.detail, /timestamp/);
      const future = signedHeaders(privateKey, body, Math.floor(Date.now() / 1000) + 11 * 60);
      assertProblem(await postWebhook(t, undefined, body, future), 403, 'invalid_signature');
    });
    assert.equal(await storedEvents(), stored);
    assert.equal(await contactStatus(delivery(8)), 'Subscribed');
    assert.equal((await deliveryRow(delivery(8))).state, 'sent');
    assert.ok(logLines.some((line) => /bad signature/.test(line)));
  });

  test('a replayed batch changes no counter and says what it skipped', async () => {
    const batch = [sendgridEvent(delivery(9), 'delivered'), sendgridEvent(delivery(9), 'open'), sendgridEvent(delivery(9), 'unsubscribe')];
    const first = await postWebhook(t, privateKey, batch);
    assert.deepEqual(first.body, { recorded: 3, duplicates: 0, ignored: 0 });
    await expectChange({}, async () => {
      for (let i = 0; i < 3; i++) {
        const again = await postWebhook(t, privateKey, batch);
        assert.equal(again.status, 200, again.raw);
        assert.deepEqual(again.body, { recorded: 0, duplicates: 3, ignored: 0 });
      }
    });
    // The same event twice inside one batch is one event.
    const repeated = sendgridEvent(delivery(9), 'click');
    await expectChange({ click: 1 }, async () => {
      assert.deepEqual((await postWebhook(t, privateKey, [repeated, repeated])).body, { recorded: 1, duplicates: 1, ignored: 0 });
      assert.deepEqual((await postWebhook(t, privateKey, [repeated])).body, { recorded: 0, duplicates: 1, ignored: 0 });
    });
  });

  test('the same batch posted concurrently is counted once', async () => {
    const batch = [sendgridEvent(delivery(10), 'open'), sendgridEvent(delivery(10), 'click'), sendgridEvent(delivery(11), 'open')];
    await expectChange({ open: 2, click: 1 }, async () => {
      const replies = await Promise.all(Array.from({ length: 4 }, () => postWebhook(t, privateKey, batch)));
      for (const reply of replies) assert.equal(reply.status, 200, reply.raw);
      assert.equal(
        replies.reduce((sum, r) => sum + r.body.recorded, 0),
        3,
      );
      assert.equal(
        replies.reduce((sum, r) => sum + r.body.duplicates, 0),
        9,
      );
    });
  });

  test('concurrent batches about the same deliveries, in different orders, neither deadlock nor lose a count', async () => {
    const other = await sendEmail(t, owner, 6);
    const readOther = async () => (await asKey(t.app, owner.key).get(`/v3/templated_emails/${other.id}`)).body.reporting;
    const batches = Array.from({ length: 6 }, (_, i) => {
      const events = other.deliveries.flatMap((d) => [
        sendgridEvent(d, 'delivered'),
        sendgridEvent(d, 'open'),
        sendgridEvent(d, 'bounce', { type: 'blocked' }),
      ]);
      // Each batch names the deliveries in another order.
      return i % 2 === 0 ? events : events.reverse();
    });
    const replies = await Promise.all(batches.map((batch) => postWebhook(t, privateKey, batch)));
    for (const reply of replies) assert.deepEqual(reply.body, { recorded: 18, duplicates: 0, ignored: 0 }, reply.raw);
    const counted = await readOther();
    // Each event counts once, but a delivery bounces once: of the six bounces of each delivery
    // (six events with ids of their own) the one that moved it to bounced counts.
    assert.deepEqual([counted.delivered, counted.open, counted.bounce, counted.soft_bounce], [36, 36, 6, 6]);
    const listed = await asKey(t.app, owner.key).get(`/v3/templated_emails/${other.id}/deliveries`);
    assert.deepEqual(new Set(listed.body.data.map((d: { state: string }) => d.state)), new Set(['bounced']));
  });

  test('events out of order: delivered after open; a bounce is not undone by a later delivered', async () => {
    const d = delivery(10);
    const deliveredAt = Math.floor(Date.now() / 1000) - 60;
    await expectChange({ open: 1, delivered: 1 }, async () => {
      await postWebhook(t, privateKey, [sendgridEvent(d, 'open')]);
      assert.equal((await deliveryRow(d)).state, 'sent');
      await postWebhook(t, privateKey, [sendgridEvent(d, 'delivered', { timestamp: deliveredAt })]);
    });
    const row = await deliveryRow(d);
    assert.equal(row.state, 'delivered');
    assert.equal(
      row.delivered_at,
      `${new Date(deliveredAt * 1000).toISOString().slice(0, 19)}Z`,
      'delivered_at is when SendGrid delivered it',
    );

    const b = delivery(11);
    await expectChange({ bounce: 1, hard_bounce: 1, delivered: 1 }, async () => {
      await postWebhook(t, privateKey, [sendgridEvent(b, 'bounce', { type: 'bounce' })]);
      await postWebhook(t, privateKey, [sendgridEvent(b, 'delivered')]);
    });
    assert.equal((await deliveryRow(b)).state, 'bounced');
    assert.equal((await deliveryRow(b)).delivered_at, null);
    assert.equal(await contactStatus(b), 'Inactive - Hard Bounce');
  });

  test('a bounce told twice (SendGrid, then the DSN at the VERP address) counts once; a later delivered moves nothing', async () => {
    const other = await sendEmail(t, owner, 1);
    const d = other.deliveries[0] as SentDelivery;
    await postWebhook(t, privateKey, [sendgridEvent(d, 'bounce', { type: 'bounce' })]);
    const dsn = { deliveryId: d.id, type: 'hard_bounce' as const, occurredAt: new Date(), detail: '5.1.1' };
    const recorded = await recordDeliveryEvents(t.database.db, [{ ...dsn, source: 'inbound', eventId: `hard_bounce:${d.id}` }], new Date());
    assert.deepEqual(recorded, { recorded: 1, duplicates: 0, unknown: 0 }, 'the DSN is stored');
    const counted = (await asKey(t.app, owner.key).get(`/v3/templated_emails/${other.id}`)).body.reporting;
    assert.deepEqual([counted.bounce, counted.hard_bounce, counted.soft_bounce], [1, 1, 0]);
  });

  test('unknown event types and events for unknown deliveries are ignored, counted and logged', async () => {
    const d = delivery(1);
    const foreign = { ...sendgridEvent(d, 'open') } as Record<string, unknown>;
    delete foreign.hopper_delivery_id;
    const batch = [
      sendgridEvent(d, 'teleported'),
      sendgridEvent(d, 'group_resubscribe'),
      { ...sendgridEvent(d, '__proto__') },
      sendgridEvent({ ...d, id: 999_999_999 }, 'open'),
      sendgridEvent(d, 'open', { hopper_delivery_id: 'abc' }),
      foreign,
      sendgridEvent(d, 'open', { email: 'someone-else@example.com' }),
      sendgridEvent(d, 'open', { sg_event_id: undefined }),
      'not an event',
      null,
      sendgridEvent(d, 'open', { email: d.address.toUpperCase() }),
    ];
    await expectChange({ open: 1 }, async () => {
      const reply = await postWebhook(t, privateKey, batch);
      assert.equal(reply.status, 200, reply.raw);
      assert.deepEqual(reply.body, { recorded: 1, duplicates: 0, ignored: 10 });
    });
    const warning = logLines.map((line) => JSON.parse(line)).find((entry) => entry.msg === 'SendGrid events of unknown types ignored');
    assert.ok(warning, 'a warning names the unknown types');
    assert.equal(warning.level, 40);
    assert.equal(warning.types.teleported, 1);
    assert.equal(warning.types.group_resubscribe, undefined, 'a known but unused type is no news');
    const counted = logLines.map((line) => JSON.parse(line)).find((entry) => entry.msg === 'SendGrid events ignored');
    assert.ok(counted);
    assert.equal(counted.ignored, 10);
  });

  test('malformed JSON, a non-array and an empty body are 400 once signed; other content types 415', async () => {
    assertProblem(await postWebhook(t, privateKey, '[{"event": '), 400, 'bad_request');
    assertProblem(await postWebhook(t, privateKey, '{"event": "open"}'), 400, 'bad_request');
    assertProblem(await postWebhook(t, privateKey, ''), 400, 'bad_request');
    assert.deepEqual((await postWebhook(t, privateKey, '[]')).body, { recorded: 0, duplicates: 0, ignored: 0 });
    const text = await postWebhook(t, privateKey, '[]', { 'content-type': 'text/plain' });
    assertProblem(text, 415, 'unsupported_media_type');
    // Unsigned malformed input is refused before it is parsed.
    assertProblem(await postWebhook(t, undefined, '[{"event": '), 403, 'invalid_signature');
  });

  test('batches larger than the API-wide 1 MiB limit are taken, up to 5 MiB', async () => {
    const d = delivery(1);
    const padding = 'x'.repeat(1000);
    const big = Array.from({ length: 2000 }, () => sendgridEvent(d, 'teleported', { padding }));
    const body = JSON.stringify(big);
    assert.ok(body.length > 2 * 1024 * 1024);
    const reply = await postWebhook(t, privateKey, body);
    assert.equal(reply.status, 200, reply.raw.slice(0, 300));
    assert.equal(reply.body.ignored, 2000);
    const huge = JSON.stringify(Array.from({ length: 6000 }, () => sendgridEvent(d, 'teleported', { padding })));
    const refused = await postWebhook(t, privateKey, huge);
    assertProblem(refused, 413, 'payload_too_large');
    assert.match(refused.body.detail, /5242880/);
  });

  test('the route is in the OpenAPI document', async () => {
    const doc = await asKey(t.app, undefined).get('/v3/openapi.json');
    assert.ok(doc.body.paths['/v3/callbacks/sendgrid']?.post);
  });
});

describe('SendGrid event webhook without a configured key', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('refuses every post with 503 webhook_not_configured (SendGrid retries), signed or not', async () => {
    const { privateKey } = sendgridKeyPair();
    assertProblem(await postWebhook(t, privateKey, '[]'), 503, 'webhook_not_configured');
    assertProblem(await postWebhook(t, undefined, '[]'), 503, 'webhook_not_configured');
  });
});

describe('SENDGRID_WEBHOOK_PUBLIC_KEY', () => {
  test('takes the base64 key SendGrid shows, or PEM (also with literal \\n line breaks)', () => {
    const { publicKeyBase64, publicKeyPem } = sendgridKeyPair();
    for (const text of [publicKeyBase64, publicKeyPem, publicKeyPem.replaceAll('\n', '\\n'), publicKeyBase64.replace(/(.{20})/g, '$1\n')]) {
      const key = loadConfig({ SENDGRID_WEBHOOK_PUBLIC_KEY: text }).sendgridWebhookKey;
      assert.equal(key?.asymmetricKeyDetails?.namedCurve, 'prime256v1', text);
    }
    assert.equal(loadConfig({}).sendgridWebhookKey, undefined);
  });

  test('refuses anything else, naming the variable', () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });
    const p384 = publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
    for (const bad of ['not a key', 'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE', p384]) {
      assert.throws(() => loadConfig({ SENDGRID_WEBHOOK_PUBLIC_KEY: bad }), /SENDGRID_WEBHOOK_PUBLIC_KEY/, bad);
    }
  });
});
