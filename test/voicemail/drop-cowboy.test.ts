import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { asKey } from '../support/client.ts';
import { FakeDropCowboy, PHONE_LINE_ID } from './support/fake-drop-cowboy.ts';
import {
  deliveryTo,
  dropAudio,
  postHttps,
  readDrop,
  sendDrop,
  startVoicemailApp,
  type TestClock,
  type VoicemailApp,
  waitFor,
  waitForDrop,
} from './support/voicemail-app.ts';

const CREDENTIALS = { key: 'dc-key-123', secret: 'dc-secret-456' };
/** One signing secret per webhook: Drop Cowboy signs each webhook with its own. */
const WEBHOOK_SECRETS = ['whsec_first_webhook', 'whsec_second_webhook'];
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The keys of a JSON value, nested, with the type of each leaf: what two bodies share when their values differ. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return ['array'];
  if (value === null) return 'null';
  if (typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, shape(v)]),
    );
  return typeof value;
}

describe("the fake Drop Cowboy posts bodies shaped as Drop Cowboy's own fixtures", () => {
  const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../fixtures/dropcowboy/${name}`, import.meta.url), 'utf8'));
  const fake = new FakeDropCowboy({ ...CREDENTIALS, webhookSecrets: [], ca: '', now: () => new Date() });
  const drop = {
    messageId: randomUUID(),
    dropId: randomUUID(),
    receiptDropId: '66f1c2a9e4b0a1d2c3f4e5a9',
    idempotencyKey: randomUUID(),
    body: { to: '+13125550142', foreign_id: '7', callback_url: 'https://hopper.test/cb' },
    raw: '',
  };

  test('status, receipt and callback: the same fields, nested alike; drop_id and contact_id as upstream relate them', () => {
    const upstream = {
      status: fixture('webhook.rvm-status.json'),
      receipt: fixture('webhook.rvm-receipt.json'),
      callback: fixture('callback.rvm-success.json'),
    };
    const status = fake.webhookBody(drop, 'contact.rvm.status', { status: 'success', reason_code: 0 }, randomUUID());
    const receipt = fake.webhookBody(
      drop,
      'contact.rvm.receipt',
      { status: 'failure', reason_code: 4002, reason: 'VoiceMail Full' },
      randomUUID(),
    );
    const callback = fake.callbackBody(drop, { status: 'success', reason_code: 0 });
    assert.deepEqual(shape(status), shape(upstream.status));
    assert.deepEqual(shape(receipt), shape(upstream.receipt));
    assert.deepEqual(shape(callback), shape(upstream.callback));
    // Upstream: the callback's drop_id is the status's; the receipt's is another (a 24-hex id, not a UUID).
    assert.equal(upstream.callback.drop_id, upstream.status.data.drop_id);
    assert.notEqual(upstream.receipt.data.drop_id, upstream.status.data.drop_id);
    assert.match(upstream.receipt.data.drop_id, /^[0-9a-f]{24}$/);
    assert.equal((callback as any).drop_id, (status as any).data.drop_id);
    assert.notEqual((receipt as any).data.drop_id, (status as any).data.drop_id);
    assert.match((receipt as any).data.drop_id, /^[0-9a-f]{24}$/);
    // Upstream: contact_id is the contact's, the same on all three; no foreign_id or message_id on the webhooks.
    assert.equal(upstream.receipt.data.contact_id, upstream.status.data.contact_id);
    assert.equal(upstream.callback.contact_id, upstream.status.data.contact_id);
    assert.equal((receipt as any).data.contact_id, (status as any).data.contact_id);
    assert.equal((callback as any).contact_id, (status as any).data.contact_id);
    for (const body of [upstream.status, upstream.receipt, status, receipt]) {
      assert.equal(JSON.stringify(body).includes('foreign_id'), false);
      assert.equal(JSON.stringify(body).includes('message_id'), false);
    }
  });
});

/** Drop Cowboy (API v2) against a local server that speaks the protocol its repository documents. */
describe('Drop Cowboy', () => {
  let app: VoicemailApp;
  let dc: FakeDropCowboy;
  let clock: TestClock | undefined;
  before(async () => {
    dc = new FakeDropCowboy({ ...CREDENTIALS, webhookSecrets: WEBHOOK_SECRETS, ca: '', now: () => (clock ? clock.now() : new Date()) });
    await dc.listen();
    app = await startVoicemailApp({
      DROPCOWBOY_KEY: CREDENTIALS.key,
      DROPCOWBOY_SECRET: CREDENTIALS.secret,
      DROPCOWBOY_WEBHOOK_SECRETS: WEBHOOK_SECRETS.join(', '),
      DROPCOWBOY_URL: dc.url,
    });
    clock = app.clock;
    dc.trust(app.ca);
  });
  after(async () => {
    await app.close();
    await dc.close();
  });

  const listing = async (dropId: number) => {
    const reply = await asKey(app.t.app, app.owner.key).get(`/v3/voicemail_drops/${dropId}/deliveries`);
    assert.equal(reply.status, 200, reply.raw);
    return reply.body.data as any[];
  };
  const events = async (deliveryId: number) =>
    app.t.database.db.selectFrom('delivery_events').selectAll().where('delivery_id', '=', deliveryId).execute();

  test('three drops: results by webhook only, callback only, and both (counted once), out of order and replayed', async () => {
    const media = await dropAudio(app);
    dc.failFirst('+17272329202', 503, 502);
    dc.loseReplyOnce('+17272329204');
    const drops = {
      webhook: await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329201' }, { phone: '7272329202' }], { media_id: media.id }),
      callback: await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329203' }, { phone: '7272329204' }], { media_id: media.id }),
      both: await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329205' }, { phone: '7272329206' }], { media_id: media.id }),
    };
    for (const drop of Object.values(drops)) {
      const sent = await waitForDrop(app, drop.id, 'the drop to be handed over', (d) => d.status === 'Sent');
      assert.equal(sent.reporting.sent, 2);
    }
    assert.deepEqual(dc.violations, [], 'every request follows the documented rules');

    // The audio went to the media library once, for all three drops, imported from its public URL.
    assert.deepEqual(
      dc.imports.map((i) => i.url),
      [media.full_url],
    );
    assert.ok((dc.imports[0]?.bytes ?? 0) > 90_000);
    assert.equal(dc.requests.filter((r) => r.path === '/phone/public/lines').length, 1, 'the default line is looked up once');

    const tokens = new Set<string>();
    for (const phone of ['7272329201', '7272329202', '7272329203', '7272329204', '7272329205', '7272329206']) {
      const dropId = phone <= '7272329202' ? drops.webhook.id : phone <= '7272329204' ? drops.callback.id : drops.both.id;
      const delivery = await deliveryTo(app.t, dropId, phone);
      const queued = dc.dropTo(`+1${phone}`);
      const token = /\/v3\/callbacks\/dropcowboy\/callback\/([\w-]{32})$/.exec(queued.body.callback_url as string)?.[1];
      assert.ok(token, queued.body.callback_url);
      tokens.add(token);
      assert.deepEqual(queued.body, {
        to: `+1${phone}`,
        phone_line_id: PHONE_LINE_ID,
        media_id: dc.imports[0]?.mediaId,
        foreign_id: String(delivery.id),
        callback_url: `${app.publicUrl}/v3/callbacks/dropcowboy/callback/${token}`,
      });
      assert.equal(delivery.provider_message_id, queued.messageId);
      assert.match(queued.idempotencyKey, UUID_V4);
      const tries = dc.requests.filter((r) => r.path === '/rvm' && JSON.parse(r.body).to === `+1${phone}`);
      // 5xx twice then accepted; a lost reply then the same key again; else one try.
      assert.equal(tries.length, phone === '7272329202' ? 3 : phone === '7272329204' ? 2 : 1, phone);
      assert.deepEqual(new Set(tries.map((r) => r.idempotencyKey)), new Set([queued.idempotencyKey]), 'the same key on every try');
      assert.deepEqual(new Set(tries.map((r) => r.body)), new Set([tries[0]?.body]), 'and the same body');
    }
    assert.equal(tokens.size, 6, 'a callback token per delivery');
    assert.equal(new Set(dc.drops.map((d) => d.idempotencyKey)).size, 6);
    assert.equal(dc.drops.length, 6, 'one drop per number, however many tries');

    // Handed over: each delivery says it waits for Drop Cowboy.
    for (const delivery of await listing(drops.webhook.id)) {
      assert.equal(delivery.state, 'sent');
      assert.equal(delivery.waiting_reason, "Handed over: waiting for Drop Cowboy's result");
      assert.equal(delivery.proof_of_delivery_url, null);
    }

    // ── Webhook only, out of order: the second number first; for the first, the receipt before the status.
    const url = app.publicUrl;
    const mailboxMissing = await dc.webhook(url, dc.dropTo('+17272329202'), 'contact.rvm.status', { status: 'failure', reason_code: 4001 });
    assert.deepEqual([mailboxMissing.status, mailboxMissing.json], [200, { recorded: 1, duplicates: 0, ignored: 0 }]);
    const receipt = await dc.webhook(url, dc.dropTo('+17272329201'), 'contact.rvm.receipt', { status: 'success', reason_code: 0 });
    assert.deepEqual(receipt.json, { recorded: 0, duplicates: 0, ignored: 0 }, 'a receipt that outruns the status is kept: not a result');
    const statusId = '9b0e8c4a-1d2f-4e3a-8b5c-6d7e8f9a0b1c';
    const status = await dc.webhook(
      url,
      dc.dropTo('+17272329201'),
      'contact.rvm.status',
      { status: 'success', reason_code: 0 },
      { eventId: statusId },
    );
    assert.deepEqual(status.json, { recorded: 1, duplicates: 0, ignored: 0 }, 'the status after it is the result');
    const replay = await dc.webhook(
      url,
      dc.dropTo('+17272329201'),
      'contact.rvm.status',
      { status: 'success', reason_code: 0 },
      { eventId: statusId },
    );
    assert.deepEqual(replay.json, { recorded: 0, duplicates: 1, ignored: 0 }, 'a replayed event_id');
    // Signed with the other webhook's secret: accepted too.
    const firstSecret = await dc.webhook(
      url,
      dc.dropTo('+17272329202'),
      'contact.rvm.receipt',
      { status: 'failure', reason_code: 4001 },
      { secret: WEBHOOK_SECRETS[0] },
    );
    assert.deepEqual(firstSecret.json, { recorded: 0, duplicates: 0, ignored: 0 }, 'a receipt adds its proof, never a result');

    // ── Callback only, replayed.
    const left = await dc.callback(dc.dropTo('+17272329203'), { status: 'success', reason_code: 0 });
    assert.deepEqual([left.status, left.json], [200, { recorded: 1, duplicates: 0, ignored: 0 }]);
    const broke = await dc.callback(dc.dropTo('+17272329204'), { status: 'failure', reason_code: 3000, reason: 'Insufficient funds' });
    assert.deepEqual(broke.json, { recorded: 1, duplicates: 0, ignored: 0 });
    const again = await dc.callback(dc.dropTo('+17272329203'), { status: 'success', reason_code: 0 });
    assert.deepEqual(again.json, { recorded: 0, duplicates: 1, ignored: 0 });

    // ── Both channels, in both orders: counted once.
    const cbFirst = await dc.callback(dc.dropTo('+17272329205'), { status: 'success', reason_code: 0 });
    const whSecond = await dc.webhook(url, dc.dropTo('+17272329205'), 'contact.rvm.status', { status: 'success', reason_code: 0 });
    assert.deepEqual([cbFirst.json.recorded, whSecond.json.recorded, whSecond.json.duplicates], [1, 0, 1]);
    const whFirst = await dc.webhook(url, dc.dropTo('+17272329206'), 'contact.rvm.status', { status: 'failure', reason_code: 4002 });
    const cbSecond = await dc.callback(dc.dropTo('+17272329206'), { status: 'failure', reason_code: 4002 });
    assert.deepEqual([whFirst.json.recorded, cbSecond.json.recorded, cbSecond.json.duplicates], [1, 0, 1]);
    const proof = await dc.webhook(url, dc.dropTo('+17272329205'), 'contact.rvm.receipt', { status: 'success', reason_code: 0 });
    assert.equal(proof.status, 200);

    const expected = { webhook: [1, 1], callback: [1, 1], both: [1, 1] };
    for (const [name, drop] of Object.entries(drops)) {
      const done = await waitForDrop(
        app,
        drop.id,
        `${name}: the results to count`,
        (d) => d.reporting.delivered + d.reporting.failed === 2,
      );
      assert.deepEqual([done.reporting.delivered, done.reporting.failed], expected[name as keyof typeof expected], name);
      assert.equal(done.reporting.sent, 2);
    }
    for (const phone of ['7272329201', '7272329203', '7272329205']) {
      const dropId = phone === '7272329201' ? drops.webhook.id : phone === '7272329203' ? drops.callback.id : drops.both.id;
      const delivery = await deliveryTo(app.t, dropId, phone);
      assert.equal(delivery.state, 'delivered', phone);
      assert.deepEqual(
        (await events(delivery.id)).map((e) => [e.source, e.type]),
        [['dropcowboy', 'delivered']],
        `${phone}: one event whatever the channels`,
      );
    }
    const noFunds = await deliveryTo(app.t, drops.callback.id, '7272329204');
    assert.equal(noFunds.state, 'failed');
    assert.match((await events(noFunds.id))[0]?.detail ?? '', /no funds: add funds.*\[reason code 3000\].*Insufficient funds/);
    const noBox = await deliveryTo(app.t, drops.webhook.id, '7272329202');
    assert.match((await events(noBox.id))[0]?.detail ?? '', /No voicemail box is set up on this number \(not retried\)/);

    // The proof of delivery is in the deliveries listing; nothing waits any more.
    const proofs = Object.fromEntries(
      [...(await listing(drops.webhook.id)), ...(await listing(drops.callback.id)), ...(await listing(drops.both.id))].map((d) => [
        d.address,
        [d.proof_of_delivery_url, d.waiting_reason, d.next_attempt_at],
      ]),
    );
    const receiptUrl = (to: string) => `https://api-v2.dropcowboy.com/campaign/public/receipts/rc-${dc.dropTo(to).dropId}`;
    const callbackUrl = (to: string) => `https://api-v2.dropcowboy.com/campaign/public/receipts/cb-${dc.dropTo(to).dropId}`;
    assert.deepEqual(proofs, {
      '7272329201': [receiptUrl('+17272329201'), null, null],
      '7272329202': [receiptUrl('+17272329202'), null, null],
      '7272329203': [callbackUrl('+17272329203'), null, null],
      '7272329204': [callbackUrl('+17272329204'), null, null],
      // The callback's proof (matched by foreign_id) stays when the receipt comes after it.
      '7272329205': [callbackUrl('+17272329205'), null, null],
      '7272329206': [callbackUrl('+17272329206'), null, null],
    });
  });

  test('a result that beats the answer to the send is kept, and counted once the hand-over is recorded', async () => {
    dc.callbackBeforeReply('+17272329220', { status: 'failure', reason_code: 4002 });
    const drop = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329220' }]);
    const done = await waitForDrop(app, drop.id, 'the early result to count', (d) => d.status === 'Sent' && d.reporting.failed === 1);
    assert.deepEqual([done.reporting.sent, done.reporting.delivered, done.reporting.failed], [1, 0, 1]);
    const posted = dc.posts.at(-1);
    assert.deepEqual(
      [posted?.kind, posted?.status, JSON.parse(posted?.body ?? '{}')],
      ['callback', 200, { recorded: 0, duplicates: 0, ignored: 0 }],
    );
    const delivery = await deliveryTo(app.t, drop.id, '7272329220');
    assert.equal(delivery.state, 'failed');
    assert.deepEqual(
      (await events(delivery.id)).map((e) => e.type),
      ['failed'],
    );
  });

  test('an upload Drop Cowboy refuses fails the delivery with its reason, untried; a 5xx on upload is retried', async () => {
    dc.refuseImports.push(403);
    const refused = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329230' }]);
    const failed = await waitForDrop(app, refused.id, 'the drop to fail', (d) => d.status === 'Failed');
    assert.equal(failed.reporting.failed, 1);
    const delivery = await deliveryTo(app.t, refused.id, '7272329230');
    assert.equal(delivery.attempts, 1);
    assert.match(
      String(delivery.last_error),
      /did not import the audio.*HTTP 403: Forbidden — this key lacks media:write — insufficient_scope/,
    );
    assert.equal(dc.dropsTo('+17272329230').length, 0, 'nothing was sent');

    const importsBefore = dc.requests.filter((r) => r.path === '/media/public/media').length;
    dc.refuseImports.push(503);
    const retried = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329231' }]);
    const sent = await waitForDrop(app, retried.id, 'the drop to go out after a retry', (d) => d.status === 'Sent');
    assert.equal(sent.reporting.sent, 1);
    // A failed import answers for a second (every delivery of a batch), then is tried again: twice in all.
    assert.ok(sent.reporting.deferred >= 1);
    assert.deepEqual(
      dc.requests
        .filter((r) => r.path === '/media/public/media')
        .slice(importsBefore)
        .map((r) => r.status),
      [503, 201],
    );
    assert.deepEqual(dc.violations, []);
  });

  test('a webhook names only the number: it goes to the oldest delivery of that number still waiting', async () => {
    const media = await dropAudio(app);
    const older = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329210' }], { media_id: media.id });
    await waitForDrop(app, older.id, 'the first drop to be handed over', (d) => d.status === 'Sent');
    const newer = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329210' }], { media_id: media.id });
    await waitForDrop(app, newer.id, 'the second drop to be handed over', (d) => d.status === 'Sent');
    const [first, second] = dc.dropsTo('+17272329210');
    assert.ok(first && second);
    // The newer drop's event arrives first: Drop Cowboy's status events carry no foreign_id.
    const a = await dc.webhook(app.publicUrl, second, 'contact.rvm.status', { status: 'failure', reason_code: 4002 });
    assert.deepEqual(a.json, { recorded: 1, duplicates: 0, ignored: 0 });
    await waitForDrop(app, older.id, 'the older drop to take the first result', (d) => d.reporting.failed === 1);
    const b = await dc.webhook(app.publicUrl, first, 'contact.rvm.status', { status: 'success', reason_code: 0 });
    assert.deepEqual(b.json, { recorded: 1, duplicates: 0, ignored: 0 });
    await waitForDrop(app, newer.id, 'the newer drop to take the second', (d) => d.reporting.delivered === 1);
    // A third result for the number (another Drop Cowboy drop) finds nothing waiting.
    const c = await dc.webhook(app.publicUrl, { ...first, dropId: randomUUID() }, 'contact.rvm.status', {
      status: 'success',
      reason_code: 0,
    });
    assert.deepEqual(c.json, { recorded: 0, duplicates: 0, ignored: 1 });
  });

  /** The delivery of `drop` (one recipient) as the deliveries listing shows it. */
  const only = async (dropId: number) => {
    const [delivery, ...more] = await listing(dropId);
    assert.ok(delivery && more.length === 0);
    return delivery;
  };
  const receiptOf = (drop: { dropId: string }) => `https://api-v2.dropcowboy.com/campaign/public/receipts/rc-${drop.dropId}`;
  const settled = async (dropId: number) => {
    const delivery = await only(dropId);
    return [delivery.state, delivery.proof_of_delivery_url];
  };
  const sendTwice = async (phone: string) => {
    const media = await dropAudio(app);
    const first = await sendDrop(app, 'Drop Cowboy', [{ phone }], { media_id: media.id });
    await waitForDrop(app, first.id, 'the first drop to be handed over', (d) => d.status === 'Sent');
    const second = await sendDrop(app, 'Drop Cowboy', [{ phone }], { media_id: media.id });
    await waitForDrop(app, second.id, 'the second drop to be handed over', (d) => d.status === 'Sent');
    const [a, b] = dc.dropsTo(`+1${phone}`);
    assert.ok(a && b);
    assert.deepEqual([a.body.foreign_id, b.body.foreign_id], [String((await only(first.id)).id), String((await only(second.id)).id)]);
    return { first, second, a, b };
  };

  test("one number, two drops in flight: a receipt (its drop_id is not the status's) never takes a delivery; it joins its status's, before or after it", async () => {
    const { first, second, a, b } = await sendTwice('7272329250');
    assert.notEqual(a.receiptDropId, a.dropId, 'as upstream: the receipt names another drop_id than the status');
    const url = app.publicUrl;
    const full = { status: 'failure', reason_code: 4002, reason: 'VoiceMail Full' } as const;

    // The first send's receipt outruns its status: kept, nothing counted, neither delivery taken.
    const receiptId = randomUUID();
    const early = await dc.webhook(url, a, 'contact.rvm.receipt', full, { eventId: receiptId });
    assert.deepEqual(early.json, { recorded: 0, duplicates: 0, ignored: 0 });
    assert.deepEqual(await settled(first.id), ['sent', null]);
    assert.deepEqual(await settled(second.id), ['sent', null]);
    const replayed = await dc.webhook(url, a, 'contact.rvm.receipt', full, { eventId: receiptId });
    assert.deepEqual(replayed.json, { recorded: 0, duplicates: 1, ignored: 0 });

    // Its status (another drop_id) goes to the first delivery, and the receipt joins it there.
    const status = await dc.webhook(url, a, 'contact.rvm.status', full);
    assert.deepEqual(status.json, { recorded: 1, duplicates: 0, ignored: 0 });
    await waitForDrop(app, first.id, 'the first result to count', (d) => d.reporting.failed === 1);
    assert.deepEqual(await settled(first.id), ['failed', receiptOf(a)]);
    assert.deepEqual(await settled(second.id), ['sent', null], 'the second delivery still waits for its own result');

    // The second send: status then receipt.
    const left = await dc.webhook(url, b, 'contact.rvm.status', { status: 'success', reason_code: 0 });
    assert.deepEqual(left.json, { recorded: 1, duplicates: 0, ignored: 0 });
    const proof = await dc.webhook(url, b, 'contact.rvm.receipt', { status: 'success', reason_code: 0 });
    assert.deepEqual(proof.json, { recorded: 0, duplicates: 0, ignored: 0 });
    await waitForDrop(app, second.id, 'the second result to count', (d) => d.reporting.delivered === 1);
    assert.deepEqual(await settled(second.id), ['delivered', receiptOf(b)]);
    assert.deepEqual(await settled(first.id), ['failed', receiptOf(a)]);
    for (const drop of [first, second]) assert.equal((await events((await only(drop.id)).id)).length, 1);

    // A third receipt for the number has no result left to join: not one of Hopper's.
    const stray = await dc.webhook(url, { ...b, receiptDropId: 'ffffffffffffffffffffffff' }, 'contact.rvm.receipt', {
      status: 'success',
      reason_code: 0,
    });
    assert.deepEqual(stray.json, { recorded: 0, duplicates: 0, ignored: 1 });
    assert.deepEqual(await settled(second.id), ['delivered', receiptOf(b)]);
  });

  test('a status and its receipt posted at the same moment are matched together, for numbers with two drops in flight', async () => {
    const media = await dropAudio(app);
    const phones = ['7272329260', '7272329261', '7272329262', '7272329263'];
    const first = await sendDrop(
      app,
      'Drop Cowboy',
      phones.map((phone) => ({ phone })),
      { media_id: media.id },
    );
    await waitForDrop(app, first.id, 'the first drop to be handed over', (d) => d.status === 'Sent');
    const second = await sendDrop(
      app,
      'Drop Cowboy',
      phones.map((phone) => ({ phone })),
      { media_id: media.id },
    );
    await waitForDrop(app, second.id, 'the second drop to be handed over', (d) => d.status === 'Sent');
    const url = app.publicUrl;
    const noBox = { status: 'failure', reason_code: 4001, reason: 'No Voicemail Setup' } as const;
    const left = { status: 'success', reason_code: 0 } as const;
    // Each number's first send: its status and its receipt at once, every number at once.
    const firstRound = await Promise.all(
      phones.flatMap((phone) => {
        const [a] = dc.dropsTo(`+1${phone}`);
        assert.ok(a);
        return [dc.webhook(url, a, 'contact.rvm.status', noBox), dc.webhook(url, a, 'contact.rvm.receipt', noBox)];
      }),
    );
    assert.deepEqual(
      firstRound.map((r) => r.json),
      phones.flatMap(() => [
        { recorded: 1, duplicates: 0, ignored: 0 },
        { recorded: 0, duplicates: 0, ignored: 0 },
      ]),
    );
    // Then each number's second send, the receipt posted first this time.
    const secondRound = await Promise.all(
      phones.flatMap((phone) => {
        const [, b] = dc.dropsTo(`+1${phone}`);
        assert.ok(b);
        return [dc.webhook(url, b, 'contact.rvm.receipt', left), dc.webhook(url, b, 'contact.rvm.status', left)];
      }),
    );
    assert.deepEqual(
      secondRound.map((r) => r.json),
      phones.flatMap(() => [
        { recorded: 0, duplicates: 0, ignored: 0 },
        { recorded: 1, duplicates: 0, ignored: 0 },
      ]),
    );
    const one = await waitForDrop(app, first.id, 'the first drop to count', (d) => d.reporting.failed === phones.length);
    const two = await waitForDrop(app, second.id, 'the second drop to count', (d) => d.reporting.delivered === phones.length);
    assert.deepEqual([one.reporting.delivered, two.reporting.failed], [0, 0]);
    const proofs = async (dropId: number) =>
      Object.fromEntries((await listing(dropId)).map((d) => [d.address, [d.state, d.proof_of_delivery_url]]));
    assert.deepEqual(
      await proofs(first.id),
      Object.fromEntries(phones.map((phone) => [phone, ['failed', receiptOf(dc.dropsTo(`+1${phone}`)[0] as { dropId: string })]])),
    );
    assert.deepEqual(
      await proofs(second.id),
      Object.fromEntries(phones.map((phone) => [phone, ['delivered', receiptOf(dc.dropsTo(`+1${phone}`)[1] as { dropId: string })]])),
    );
  });

  test("Drop Cowboy's own webhook fixtures, byte for byte: the status is the result, the receipt (another drop_id, 4002) waits for a 4002", async () => {
    const { first, second, b } = await sendTwice('3125550142');
    const status = readFileSync(new URL('../fixtures/dropcowboy/webhook.rvm-status.json', import.meta.url), 'utf8');
    const receipt = readFileSync(new URL('../fixtures/dropcowboy/webhook.rvm-receipt.json', import.meta.url), 'utf8');
    const post = (raw: string) =>
      dc.webhook(app.publicUrl, b, 'contact.rvm.status', { status: 'success', reason_code: 0 }, { raw, eventId: JSON.parse(raw).event_id });
    // webhook.rvm-status.json: success, reason_code 0, to +13125550142 → the first delivery.
    assert.deepEqual((await post(status)).json, { recorded: 1, duplicates: 0, ignored: 0 });
    await waitForDrop(app, first.id, 'the fixture status to count', (d) => d.reporting.delivered === 1);
    // webhook.rvm-receipt.json (the same event_id, another event): 4002, so not the proof of that
    // success, and not a result for the second delivery: kept.
    assert.deepEqual((await post(receipt)).json, { recorded: 0, duplicates: 0, ignored: 0 });
    assert.deepEqual(await settled(first.id), ['delivered', null]);
    assert.deepEqual(await settled(second.id), ['sent', null]);
    // The second send's result: mailbox full, by the callback. The receipt joins it.
    const full = await dc.callback(b, { status: 'failure', reason_code: 4002, reason: 'VoiceMail Full' });
    assert.deepEqual(full.json, { recorded: 1, duplicates: 0, ignored: 0 });
    await waitForDrop(app, second.id, 'the callback to count', (d) => d.reporting.failed === 1);
    // The callback's own proof is kept: it names the send by foreign_id.
    assert.deepEqual(await settled(second.id), ['failed', `https://api-v2.dropcowboy.com/campaign/public/receipts/cb-${b.dropId}`]);
    assert.deepEqual(await settled(first.id), ['delivered', null]);
    // And the receipt is paired with the second delivery (one receipt per send).
    const { rows } = await sql<{ delivery_id: string }>`
      SELECT delivery_id FROM provider_receipts WHERE event_key = 'contact.rvm.receipt:2694f968-93fd-44ca-9b92-2110ed1ee61e'`.execute(
      app.t.database.db,
    );
    assert.deepEqual(
      rows.map((r) => Number(r.delivery_id)),
      [(await only(second.id)).id],
    );
  });

  test('statuses by number go in send order: a drop Drop Cowboy accepted before a retried one takes the first status', async () => {
    const media = await dropAudio(app);
    // The first drop's hand-over fails (5xx) and is retried until the second drop has gone.
    dc.failFirst('+17272329270', 503, 503, 503, 503, 503, 503, 503);
    const retried = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329270' }], { media_id: media.id });
    await waitFor('the first try to fail', async () =>
      dc.requests.some((r) => r.path === '/rvm' && r.status === 503 && JSON.parse(r.body).to === '+17272329270') ? true : undefined,
    );
    const prompt = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329270' }], { media_id: media.id });
    await waitForDrop(app, prompt.id, 'the second drop to be handed over', (d) => d.status === 'Sent');
    dc.failFirst('+17272329270');
    await waitForDrop(app, retried.id, 'the first drop to be handed over', (d) => d.status === 'Sent');
    const [accepted, later] = dc.dropsTo('+17272329270');
    assert.ok(accepted && later);
    assert.equal(accepted.body.foreign_id, String((await only(prompt.id)).id), 'Drop Cowboy accepted the second drop first');
    const result = await dc.webhook(app.publicUrl, accepted, 'contact.rvm.status', { status: 'success', reason_code: 0 });
    assert.deepEqual(result.json, { recorded: 1, duplicates: 0, ignored: 0 });
    await waitForDrop(app, prompt.id, 'the drop accepted first to take the first status', (d) => d.reporting.delivered === 1);
    assert.deepEqual(await settled(retried.id), ['sent', null]);
  });

  test('bad signatures, versions, timestamps, tokens and bodies are refused and change nothing', async () => {
    const drop = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329241' }]);
    await waitForDrop(app, drop.id, 'the drop to be handed over', (d) => d.status === 'Sent');
    const target = dc.dropTo('+17272329241');
    const now = Math.floor(app.clock.now().getTime() / 1000);
    const outcome = { status: 'success', reason_code: 0 } as const;
    const refusals = [
      { signature: `sha256=${'0'.repeat(64)}` },
      { signature: 'not-a-signature' },
      { secret: 'some other secret' },
      { timestamp: now - 301 },
      // Far enough ahead that a slow machine's seconds between here and the post do not bring it within 300 s.
      { timestamp: now + 1000 },
      { version: 'v2' },
    ];
    for (const overrides of refusals) {
      const reply = await dc.webhook(app.publicUrl, target, 'contact.rvm.status', outcome, overrides);
      assert.equal(reply.status, 403, JSON.stringify(overrides));
      assert.equal(reply.json.type.endsWith('/problems/invalid_signature'), true);
    }
    const unsigned = await postHttps(`${app.publicUrl}/v3/callbacks/dropcowboy`, '{}', { 'content-type': 'application/json' }, app.ca);
    assert.equal(unsigned.status, 403);
    for (const raw of ['[]', 'not json', '{"event_id":"4f8c2e1a-7b3d-4a9e-8c6f-2d1e5b7a9c34"}', '"text"']) {
      const reply = await dc.webhook(app.publicUrl, target, 'contact.rvm.status', outcome, { raw });
      assert.equal(reply.status, 400, raw);
      assert.equal(reply.headers['content-type'], 'application/problem+json; charset=utf-8');
    }
    const otherEvent = await dc.webhook(app.publicUrl, target, 'contact.sms.status' as never, outcome);
    assert.deepEqual([otherEvent.status, otherEvent.json], [200, { recorded: 0, duplicates: 0, ignored: 1 }]);
    const stranger = await dc.webhook(
      app.publicUrl,
      { ...target, body: { ...target.body, to: '+17272320000' } },
      'contact.rvm.status',
      outcome,
    );
    assert.deepEqual(stranger.json, { recorded: 0, duplicates: 0, ignored: 1 });

    // Callbacks: the token must be this delivery's; the body a JSON object.
    const callbackUrl = target.body.callback_url as string;
    const wrongToken = await dc.callback(target, outcome, { url: callbackUrl.replace(/[\w-]{32}$/, 'x'.repeat(32)) });
    assert.equal(wrongToken.status, 403);
    const otherDelivery = await dc.callback(target, outcome, { foreignId: String(Number(target.body.foreign_id) - 1) });
    assert.equal(otherDelivery.status, 403);
    const notForeign = await dc.callback(target, outcome, { foreignId: 'abc' });
    assert.equal(notForeign.status, 403);
    for (const raw of ['[]', 'nope', '12']) {
      const reply = await postHttps(callbackUrl, raw, { 'content-type': 'application/json' }, app.ca);
      assert.equal(reply.status, 400, raw);
    }
    const form = await postHttps(callbackUrl, 'a=b', { 'content-type': 'application/x-www-form-urlencoded' }, app.ca);
    assert.equal(form.status, 415);
    const huge = await postHttps(
      callbackUrl,
      JSON.stringify({ pad: 'x'.repeat(3 * 1024 * 1024) }),
      { 'content-type': 'application/json' },
      app.ca,
    );
    assert.equal(huge.status, 413);
    const longToken = await dc.callback(target, outcome, { url: `${app.publicUrl}/v3/webhooks/dropcowboy/callback/${'t'.repeat(500)}` });
    assert.equal(longToken.status, 400);

    const after = await readDrop(app, drop.id);
    assert.deepEqual([after.reporting.delivered, after.reporting.failed], [0, 0]);
    // And the real one still counts.
    const ok = await dc.callback(target, outcome);
    assert.deepEqual(ok.json, { recorded: 1, duplicates: 0, ignored: 0 });
    await waitFor('the result to count', async () => ((await readDrop(app, drop.id)).reporting.delivered === 1 ? true : undefined));
  });
});

describe('Drop Cowboy, bring-your-own-carrier with audio_url enabled', () => {
  let app: VoicemailApp;
  let dc: FakeDropCowboy;
  let clock: TestClock | undefined;
  before(async () => {
    dc = new FakeDropCowboy({ ...CREDENTIALS, webhookSecrets: [], ca: '', now: () => (clock ? clock.now() : new Date()), byoc: true });
    await dc.listen();
    app = await startVoicemailApp({
      DROPCOWBOY_KEY: CREDENTIALS.key,
      DROPCOWBOY_SECRET: CREDENTIALS.secret,
      DROPCOWBOY_URL: dc.url,
      DROPCOWBOY_BYOC: 'true',
      DROPCOWBOY_AUDIO_URL: 'true',
    });
    clock = app.clock;
    dc.trust(app.ca);
  });
  after(async () => {
    await app.close();
    await dc.close();
  });

  test('the callback number goes as caller_id and the audio as audio_url: no line look-up, no upload', async () => {
    const drop = await sendDrop(app, 'Drop Cowboy', [{ phone: '7272329301' }]);
    await waitForDrop(app, drop.id, 'the drop to be handed over', (d) => d.status === 'Sent');
    assert.deepEqual(dc.violations, []);
    const delivery = await deliveryTo(app.t, drop.id, '7272329301');
    const queued = dc.dropTo('+17272329301');
    assert.deepEqual(Object.keys(queued.body).sort(), ['audio_url', 'callback_url', 'caller_id', 'foreign_id', 'to']);
    assert.deepEqual(
      [queued.body.caller_id, queued.body.audio_url, queued.body.foreign_id],
      ['+17272329117', drop.media.full_url, String(delivery.id)],
    );
    assert.deepEqual(dc.imports, []);
    assert.deepEqual(
      dc.requests.map((r) => `${r.method} ${r.path}`),
      ['POST /rvm'],
    );
    // Results still come by the callback; without webhook secrets the signed webhook answers 503
    // (CONTRACT.md), which Drop Cowboy retries until the secrets are set.
    const closed = await dc.webhook(app.publicUrl, queued, 'contact.rvm.status', { status: 'success', reason_code: 0 }, { secret: 'x' });
    assert.equal(closed.status, 503);
    assert.match(closed.json.type, /\/problems\/webhook_not_configured$/);
    const result = await dc.callback(queued, { status: 'failure', reason_code: 3014 });
    assert.deepEqual(result.json, { recorded: 1, duplicates: 0, ignored: 0 });
    const done = await waitForDrop(app, drop.id, 'the result to count', (d) => d.reporting.failed === 1);
    assert.equal(done.reporting.delivered, 0);
    const event = await app.t.database.db
      .selectFrom('delivery_events')
      .selectAll()
      .where('delivery_id', '=', delivery.id)
      .executeTakeFirstOrThrow();
    assert.match(event.detail ?? '', /audio_url is not enabled.*unset DROPCOWBOY_AUDIO_URL/);
  });
});
