import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FakeDropCowboy } from './support/fake-drop-cowboy.ts';
import {
  deliveryTo,
  postHttps,
  readDrop,
  sendDrop,
  startVoicemailApp,
  type TestClock,
  type VoicemailApp,
  waitForDrop,
} from './support/voicemail-app.ts';

const CREDENTIALS = { key: 'dc-key-123', secret: 'dc-secret-456', webhookSecret: 'whsec_789' };

/** Drop Cowboy (API v2) against a local server that speaks its documented protocol. */
describe('Drop Cowboy', () => {
  let app: VoicemailApp;
  let dc: FakeDropCowboy;
  // The fake signs webhooks by Hopper's clock, known once Hopper has started.
  let clock: TestClock | undefined;
  before(async () => {
    dc = new FakeDropCowboy({ ...CREDENTIALS, ca: '', now: () => (clock ? clock.now() : new Date()) });
    await dc.listen();
    app = await startVoicemailApp({
      DROPCOWBOY_KEY: CREDENTIALS.key,
      DROPCOWBOY_SECRET: CREDENTIALS.secret,
      DROPCOWBOY_WEBHOOK_SECRET: CREDENTIALS.webhookSecret,
      DROPCOWBOY_URL: dc.url,
    });
    clock = app.clock;
    dc.trust(app.ca);
  });
  after(async () => {
    await app.close();
    await dc.close();
  });

  test('three drops are Sent (a retry reuses its Idempotency-Key and drops once), then delivered: 2, failed: 1', async () => {
    dc.failFirst('+17272329118', 503);
    dc.loseReplyOnce('+17272329119');
    const drop = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329117' }, { phone: '7272329118' }, { phone: '7272329119' }]);
    const sent = await waitForDrop(app, drop.id, 'the drop to be handed over', (d) => d.status === 'Sent');
    assert.equal(sent.reporting.sent, 3);
    assert.equal(sent.reporting.deferred, 2);
    assert.equal(dc.drops.length, 3, 'one drop per number, however many tries');

    for (const phone of ['7272329117', '7272329118', '7272329119']) {
      const delivery = await deliveryTo(app.t, drop.id, phone);
      const queued = dc.dropTo(`+1${phone}`);
      assert.deepEqual(queued.body, {
        to: `+1${phone}`,
        audio_url: drop.media.full_url,
        caller_id: '+17272329117',
        foreign_id: String(delivery.id),
        callback_url: `${app.publicUrl}/v3/webhooks/dropcowboy`,
      });
      assert.equal(delivery.provider_message_id, queued.messageId);
      const tries = dc.requests.filter((r) => JSON.parse(r.body).to === `+1${phone}`);
      assert.equal(tries.length, phone === '7272329117' ? 1 : 2, phone);
      // Every try carries the same key and the same body.
      assert.deepEqual(new Set(tries.map((r) => r.idempotencyKey)), new Set([queued.idempotencyKey]));
      assert.deepEqual(new Set(tries.map((r) => r.body)), new Set([tries[0]?.body]));
      assert.match(queued.idempotencyKey, new RegExp(`-delivery-${delivery.id}$`));
    }

    const left = await dc.report(dc.dropTo('+17272329117'), { status: 'success', reason_code: 0 });
    assert.deepEqual([left.status, left.json], [200, { recorded: 1, duplicates: 0, ignored: 0 }]);
    await dc.report(dc.dropTo('+17272329118'), { status: 'success', reason_code: 0 });
    const full = await dc.report(dc.dropTo('+17272329119'), { status: 'failure', reason_code: 4002 }, { eventId: 'evt_full' });
    assert.equal(full.status, 200, full.body);

    const done = await waitForDrop(app, drop.id, 'the outcomes to count', (d) => d.reporting.delivered + d.reporting.failed === 3);
    assert.equal(done.reporting.delivered, 2);
    assert.equal(done.reporting.failed, 1);
    const failed = await deliveryTo(app.t, drop.id, '7272329119');
    assert.equal(failed.state, 'failed');
    const event = await app.t.database.db
      .selectFrom('delivery_events')
      .selectAll()
      .where('delivery_id', '=', failed.id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(
      [event.source, event.event_id, event.type, event.detail],
      ['dropcowboy', 'evt_full', 'failed', 'The voicemail box is full'],
    );

    // The same event again: answered, counted once.
    const again = await dc.report(dc.dropTo('+17272329119'), { status: 'failure', reason_code: 4002 }, { eventId: 'evt_full' });
    assert.deepEqual([again.status, again.json], [200, { recorded: 0, duplicates: 1, ignored: 0 }]);
    assert.deepEqual((await readDrop(app, drop.id)).reporting, done.reporting);
  });

  test('bad signatures, other secrets, stale or missing timestamps are refused and change nothing', async () => {
    const drop = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329141' }]);
    await waitForDrop(app, drop.id, 'the drop to be handed over', (d) => d.status === 'Sent');
    const target = dc.dropTo('+17272329141');
    const now = Math.floor(app.clock.now().getTime() / 1000);
    const refusals = [
      { signature: `sha256=${'0'.repeat(64)}` },
      { signature: 'not-a-signature' },
      { secret: 'some other secret' },
      { timestamp: now - 301 },
      { timestamp: now + 301 },
    ];
    for (const overrides of refusals) {
      const reply = await dc.report(target, { status: 'success', reason_code: 0 }, overrides);
      assert.equal(reply.status, 403, JSON.stringify(overrides));
      assert.equal(reply.json.type.endsWith('/problems/invalid_signature'), true);
    }
    const unsigned = await postHttps(`${app.publicUrl}/v3/webhooks/dropcowboy`, '{}', { 'content-type': 'application/json' }, app.ca);
    assert.equal(unsigned.status, 403);
    const drift = await dc.report(target, { status: 'failure', reason_code: 6011 }, { timestamp: now - 250 });
    assert.equal(drift.status, 200, 'a timestamp within 300 s is fine');
    const after = await readDrop(app, drop.id);
    assert.deepEqual([after.reporting.delivered, after.reporting.failed], [0, 1]);
    const event = await app.t.database.db
      .selectFrom('delivery_events')
      .select('detail')
      .where('delivery_id', '=', (await deliveryTo(app.t, drop.id, '7272329141')).id)
      .executeTakeFirstOrThrow();
    assert.equal(event.detail, 'Drop Cowboy has no consent on file for this number');
  });
});
