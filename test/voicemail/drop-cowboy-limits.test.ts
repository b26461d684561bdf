import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { DropCowboyAdapter } from '../../src/voicemail/providers/drop-cowboy.ts';
import { FakeDropCowboy, PHONE_LINE_ID, SMS_LINE_ID } from './support/fake-drop-cowboy.ts';
import { deliveryTo, dropAudio, sendDrop, startVoicemailApp, type VoicemailApp, waitFor, waitForDrop } from './support/voicemail-app.ts';

const CREDENTIALS = { key: 'dc-key-limits', secret: 'dc-secret-limits' };

/**
 * Drop Cowboy's limits as its owner documents them, against the stand-in: the default *voice*
 * line, a 429's Retry-After honoured by the whole account, one media import per audio (a refused
 * import answers for every delivery), a refusal's `details.code` kept.
 */
describe('Drop Cowboy: lines, rate limits and imports', () => {
  let app: VoicemailApp;
  let dc: FakeDropCowboy;
  before(async () => {
    dc = new FakeDropCowboy({ ...CREDENTIALS, webhookSecrets: [], ca: '', now: () => (app ? app.clock.now() : new Date()) });
    await dc.listen();
    app = await startVoicemailApp({ DROPCOWBOY_KEY: CREDENTIALS.key, DROPCOWBOY_SECRET: CREDENTIALS.secret, DROPCOWBOY_URL: dc.url });
    dc.trust(app.ca);
  });
  after(async () => {
    await app?.close();
    await dc?.close();
  });
  const rvm = () => dc.requests.filter((r) => r.method === 'POST' && r.path === '/rvm');

  test('the default voice line is the one sent, not the SMS line listed first as default', async () => {
    const drop = await sendDrop(app, 'Drop Cowboy', [{ phone: '7275552001' }]);
    await waitForDrop(app, drop.id, 'the drop to be handed over', (d) => d.status === 'Sent');
    assert.deepEqual(dc.violations, []);
    assert.equal(dc.dropTo('+17275552001').body.phone_line_id, PHONE_LINE_ID);
    assert.ok(rvm().every((r) => !r.body.includes(SMS_LINE_ID)));
  });

  test('a 429 with Retry-After: 2 — nothing goes to the account for 2 s, then every delivery goes once', async () => {
    const phones = Array.from({ length: 6 }, (_, i) => `72755521${String(i).padStart(2, '0')}`);
    const before = rvm().length;
    // 1.5 s of 429s: long enough that requests already on their way when the first came back meet it too.
    const began = dc.rateLimit(1500, 2);
    const drop = await sendDrop(
      app,
      'Drop Cowboy',
      phones.map((phone) => ({ phone })),
    );
    const sent = await waitForDrop(app, drop.id, 'every delivery handed over', (d) => d.status === 'Sent' && d.reporting.sent === 6);
    const tries = rvm().slice(before);
    const limited = tries.filter((r) => r.status === 429);
    const first429 = Math.min(...limited.map((r) => r.at));
    assert.equal(first429, began(), 'the first request met the limit');
    // Nobody tried again inside the window (the engine's own retry is 200 ms here): one 429 per number at most.
    const perNumber = new Map<string, number>();
    for (const r of limited) perNumber.set(JSON.parse(r.body).to, (perNumber.get(JSON.parse(r.body).to) ?? 0) + 1);
    assert.ok(
      [...perNumber.values()].every((n) => n === 1),
      JSON.stringify([...perNumber]),
    );
    // The first accepted request came after Retry-After.
    const accepted = tries.filter((r) => r.status === 202);
    assert.equal(accepted.length, 6);
    for (const r of accepted) assert.ok(r.at >= first429 + 1950, `a request ${r.at - first429} ms after the 429`);
    assert.ok(sent.reporting.deferred >= 1);
    for (const phone of phones) assert.equal(dc.dropsTo(`+1${phone}`).length, 1, phone);
    // Each delivery kept its key through the 429: one key, one drop per number.
    assert.equal(new Set(tries.map((r) => r.idempotencyKey)).size, 6);
  });

  test('a 2.5-second burst of 429s (Retry-After: 1): the account slows down — a few requests, not one per delivery', async () => {
    const phones = Array.from({ length: 20 }, (_, i) => `72755522${String(i).padStart(2, '0')}`);
    const before = rvm().length;
    // 2.5 s: two or three Retry-After waits; an account that did not slow down would send each of the
    // 20 deliveries at least once in it (and again every SEND_RETRY_BASE, 200 ms, after).
    const began = dc.rateLimit(2500, 1);
    const drop = await sendDrop(
      app,
      'Drop Cowboy',
      phones.map((phone) => ({ phone })),
    );
    await waitForDrop(app, drop.id, 'every delivery handed over', (d) => d.status === 'Sent' && d.reporting.sent === 20);
    const tries = rvm().slice(before);
    const started = began() ?? 0;
    const during = tries.filter((r) => r.at < started + 2500);
    console.log(`# 429 burst of 2.5 s: ${during.length} requests during it, ${tries.length} in all for 20 deliveries`);
    assert.ok(during.length <= 12, `${during.length} requests during the burst`);
    assert.equal(tries.filter((r) => r.status === 202).length, 20);
    for (const phone of phones) assert.equal(dc.dropsTo(`+1${phone}`).length, 1, phone);
  });

  test('a refused media import is asked once for the audio: 40 deliveries, one import call, each failed with its reason', async () => {
    const imports = () => dc.requests.filter((r) => r.path === '/media/public/media').length;
    const before = imports();
    dc.refuseImports.push(403);
    const phones = Array.from({ length: 40 }, (_, i) => `72755523${String(i).padStart(2, '0')}`);
    const drop = await sendDrop(
      app,
      'Drop Cowboy',
      phones.map((phone) => ({ phone })),
    );
    const failed = await waitForDrop(app, drop.id, 'the drop to fail', (d) => d.status === 'Failed');
    assert.equal(failed.reporting.failed, 40);
    assert.equal(imports() - before, 1, 'one import call for 40 deliveries');
    const delivery = await deliveryTo(app.t, drop.id, phones[17] as string);
    assert.match(String(delivery.last_error), /did not import the audio.*HTTP 403/);
  });

  test("a refusal keeps Drop Cowboy's details.code in the reason and the outcome", async () => {
    dc.refuseNext('+17275552401', 422, {
      title: 'Unprocessable Entity',
      detail: 'to is not a valid phone number',
      details: { code: 'invalid_phone_number' },
    });
    const drop = await sendDrop(app, 'Drop Cowboy', [{ phone: '7275552401' }]);
    await waitForDrop(app, drop.id, 'the drop to fail', (d) => d.status === 'Failed');
    const delivery = await deliveryTo(app.t, drop.id, '7275552401');
    assert.equal(
      delivery.last_error,
      'Drop Cowboy answered HTTP 422: Unprocessable Entity — to is not a valid phone number — invalid_phone_number',
    );
    const row = await app.t.database.db.selectFrom('deliveries').select('outcome').where('id', '=', delivery.id).executeTakeFirstOrThrow();
    assert.deepEqual(
      [row.outcome?.classification, row.outcome?.code, row.outcome?.source],
      ['refused', 'invalid_phone_number', 'dropcowboy'],
    );
  });
});

/**
 * A retry is the first attempt again: its body is kept with its Idempotency-Key and re-sent byte for
 * byte, whatever the configuration says by then. The app's own retry is an hour away; the retry is
 * made by an adapter built from the changed configuration (BYOC and audio_url on), as a restarted
 * worker would, on the same database and against the same Drop Cowboy.
 */
describe('Drop Cowboy: a retry after a configuration change', () => {
  let app: VoicemailApp;
  let dc: FakeDropCowboy;
  before(async () => {
    dc = new FakeDropCowboy({ ...CREDENTIALS, webhookSecrets: [], ca: '', now: () => (app ? app.clock.now() : new Date()) });
    await dc.listen();
    app = await startVoicemailApp({
      DROPCOWBOY_KEY: CREDENTIALS.key,
      DROPCOWBOY_SECRET: CREDENTIALS.secret,
      DROPCOWBOY_URL: dc.url,
      SEND_RETRY_BASE: '1h',
    });
    dc.trust(app.ca);
  });
  after(async () => {
    await app?.close();
    await dc?.close();
  });

  test('the retry sends the first body under the same key: no 3027, one drop, still the line and the uploaded media', async () => {
    dc.failFirst('+17275552501', 503);
    const drop = await sendDrop(app, 'Drop Cowboy', [{ phone: '7275552501' }]);
    const delivery = await waitFor('the first attempt to be deferred', async () => {
      const row = await deliveryTo(app.t, drop.id, '7275552501');
      return row.state === 'deferred' ? row : undefined;
    });
    const [first, ...others] = dc.requests.filter((r) => r.path === '/rvm');
    assert.ok(first);
    assert.equal(others.length, 0);
    assert.equal(first.status, 503);

    const changed = loadConfig({
      DATA_DIR: app.t.dataDir,
      DROPCOWBOY_KEY: CREDENTIALS.key,
      DROPCOWBOY_SECRET: CREDENTIALS.secret,
      DROPCOWBOY_URL: dc.url,
      DROPCOWBOY_BYOC: 'true',
      DROPCOWBOY_AUDIO_URL: 'true',
    });
    assert.ok(changed.dropCowboy?.byoc && changed.dropCowboy.audioUrl);
    const restarted = new DropCowboyAdapter(changed.dropCowboy, `${app.publicUrl}/moved`, app.t.database.db, app.clock.now, app.t.app.log);
    const media = await dropAudio(app);
    const result = await restarted.submit({
      deliveryId: delivery.id,
      phone: '7275552501',
      callerId: '7275550199',
      mediaId: media.id,
      audioUrl: media.full_url,
      audioType: 'wav',
    });
    assert.equal(result.ok, true, JSON.stringify(result));
    const retry = dc.requests.filter((r) => r.path === '/rvm')[1];
    assert.ok(retry);
    assert.equal(retry.body, first.body, 'byte for byte');
    assert.equal(retry.idempotencyKey, first.idempotencyKey);
    assert.deepEqual(dc.violations, [], 'Drop Cowboy saw the same body under the key');
    const queued = dc.dropTo('+17275552501');
    assert.deepEqual(Object.keys(queued.body).sort(), ['callback_url', 'foreign_id', 'media_id', 'phone_line_id', 'to']);
    assert.equal(queued.body.phone_line_id, PHONE_LINE_ID);
    assert.ok(!queued.body.callback_url?.includes('/moved'));
  });
});
