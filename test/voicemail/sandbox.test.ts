import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { configuredProviders } from '../../src/voicemail/providers.ts';
import { mp3File, upload, wavFile } from '../media/fixtures.ts';
import { asKey } from '../support/client.ts';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { deliveriesOf, deliveryTo, sendDrop, startVoicemailApp, type VoicemailApp, waitForDrop } from './support/voicemail-app.ts';

/** The Sandbox provider end to end, and the rules every drop meets at create time. */
describe('Sandbox voicemail provider', () => {
  let app: VoicemailApp;
  before(async () => {
    app = await startVoicemailApp();
  });
  after(() => app.close());

  test('each drop is recorded under DATA_DIR/voicemail and reported delivered; numbers ending in 0000 fail', async () => {
    const drop = await sendDrop(app, 'Sandbox', [{ phone: '(727) 232-9117' }, { phone: '727-232-9118' }, { phone: '727 232 0000' }]);
    const sent = await waitForDrop(app, drop.id, 'the drop to be handed over', (d) => d.status === 'Sent');
    assert.equal(sent.reason, null);
    assert.equal(sent.reporting.sent, 3);

    const done = await waitForDrop(app, drop.id, 'the Sandbox outcomes', (d) => d.reporting.delivered + d.reporting.failed === 3);
    assert.equal(done.reporting.delivered, 2);
    assert.equal(done.reporting.failed, 1);
    assert.equal(done.status, 'Sent');

    for (const delivery of await deliveriesOf(app.t, drop.id)) {
      const record = JSON.parse(await readFile(join(app.t.dataDir, 'voicemail', `${delivery.id}.json`), 'utf8'));
      assert.deepEqual(
        { ...record, submitted_at: undefined, reason: undefined },
        {
          delivery_id: delivery.id,
          phone: delivery.address,
          caller_id: '7272329117',
          audio_url: drop.media.full_url,
          audio_type: 'wav',
          submitted_at: undefined,
          outcome: delivery.address === '7272320000' ? 'failed' : 'delivered',
          reason: undefined,
          classification: delivery.address === '7272320000' ? 'no_voicemail_box' : 'delivered',
        },
      );
      assert.equal(delivery.provider_message_id, `sandbox-${delivery.id}`);
    }
    const failing = await deliveryTo(app.t, drop.id, '7272320000');
    assert.equal(failing.state, 'failed');
    const events = await app.t.database.db.selectFrom('delivery_events').selectAll().where('delivery_id', '=', failing.id).execute();
    assert.deepEqual(
      events.map((e) => [e.source, e.type]),
      [['sandbox', 'failed']],
    );
    assert.match(String(events[0]?.detail), /0000/);
    assert.equal((await deliveryTo(app.t, drop.id, '7272329117')).state, 'delivered');
  });

  test('a drop to an unconfigured provider is refused at create with a 400 naming provider', async () => {
    const api = asKey(app.t.app, app.owner.key);
    const media = await upload(app.t.app, app.t.adminKey, app.owner.id, 'ok.wav', wavFile(6));
    for (const provider of ['Slybroadcast', 'Drop Cowboy']) {
      const reply = await api.post(`/v3/users/${app.owner.id}/voicemail_drops`, {
        provider,
        media_id: media.id,
        callback_number: '7272329117',
        name: 'Unconfigured',
      });
      assertProblem(reply, 400, 'validation');
      assert.deepEqual(Object.keys(reply.body.errors), ['provider']);
      assert.match(reply.body.errors.provider[0], /not configured.*configured: Sandbox/);
    }
  });

  test('the audio must be WAV, MP3 or M4A longer than 5 seconds, at create and at update', async () => {
    const api = asKey(app.t.app, app.owner.key);
    const url = `/v3/users/${app.owner.id}/voicemail_drops`;
    const short = await upload(app.t.app, app.t.adminKey, app.owner.id, 'short.wav', wavFile(4));
    const exactlyFive = await upload(app.t.app, app.t.adminKey, app.owner.id, 'five.wav', wavFile(5));
    const long = await upload(app.t.app, app.t.adminKey, app.owner.id, 'long.mp3', mp3File(7));
    const body = { provider: 'Sandbox', callback_number: '7272329117', name: 'Length' };
    for (const media of [short, exactlyFive]) {
      const refused = await api.post(url, { ...body, media_id: media.id });
      assertProblem(refused, 400, 'validation');
      assert.deepEqual(Object.keys(refused.body.errors), ['media_id']);
      assert.match(refused.body.errors.media_id[0], /longer than 5 seconds/);
    }
    const made = await api.post(url, { ...body, media_id: long.id });
    assert.equal(made.status, 201, made.raw);
    const update = await api.put(`/v3/voicemail_drops/${made.body.id}`, { media_id: short.id });
    assertProblem(update, 400, 'validation');
    assert.deepEqual(Object.keys(update.body.errors), ['media_id']);
  });

  test('the Drop Cowboy webhook refuses posts while Drop Cowboy is not configured', async () => {
    const reply = await asKey(app.t.app, undefined).post('/v3/webhooks/dropcowboy', { event_id: 'x' });
    assertProblem(reply, 503, 'webhook_not_configured');
  });
});

describe('voicemail provider configuration', () => {
  const base = { DATA_DIR: '/tmp/hopper-config-test' };

  test('Sandbox is on by default; real providers count once all their credentials are set', () => {
    assert.deepEqual(configuredProviders(loadConfig(base)), ['Sandbox']);
    const all = loadConfig({
      ...base,
      SANDBOX_VOICEMAIL: 'false',
      SLYBROADCAST_UID: 'agent@example.com',
      SLYBROADCAST_PASSWORD: 'pw',
      DROPCOWBOY_KEY: 'k',
      DROPCOWBOY_SECRET: 's',
    });
    assert.deepEqual(configuredProviders(all), ['Slybroadcast', 'Drop Cowboy']);
    assert.equal(all.slybroadcast?.url, 'https://www.mobile-sphere.com/gateway/vmb.php');
    assert.equal(all.slybroadcast?.mobileOnly, true, 'mobile_only=1 unless SLYBROADCAST_MOBILE_ONLY=false');
    const landlinesToo = loadConfig({
      ...base,
      SLYBROADCAST_UID: 'a@example.com',
      SLYBROADCAST_PASSWORD: 'pw',
      SLYBROADCAST_MOBILE_ONLY: 'false',
    });
    assert.equal(landlinesToo.slybroadcast?.mobileOnly, false);
    assert.deepEqual(all.dropCowboy, {
      key: 'k',
      secret: 's',
      url: 'https://api-v2.dropcowboy.com',
      webhookSecrets: [],
      phoneLineId: undefined,
      byoc: false,
      audioUrl: false,
    });
    assert.equal(loadConfig(base).sandboxDelayMs, 2000);
    assert.equal(loadConfig(base).slybroadcastResultTimeoutMs, 2 * 3600_000);
    const byoc = loadConfig({
      ...base,
      DROPCOWBOY_KEY: 'k',
      DROPCOWBOY_SECRET: 's',
      DROPCOWBOY_URL: 'http://127.0.0.1:9/',
      DROPCOWBOY_WEBHOOK_SECRETS: ' first , second,,',
      DROPCOWBOY_PHONE_LINE_ID: 'line-1',
      DROPCOWBOY_BYOC: 'true',
      DROPCOWBOY_AUDIO_URL: 'yes',
      SLYBROADCAST_RESULT_TIMEOUT: '30m',
    });
    assert.deepEqual(
      [
        byoc.dropCowboy?.url,
        byoc.dropCowboy?.webhookSecrets,
        byoc.dropCowboy?.phoneLineId,
        byoc.dropCowboy?.byoc,
        byoc.dropCowboy?.audioUrl,
      ],
      ['http://127.0.0.1:9', ['first', 'second'], 'line-1', true, true],
    );
    assert.equal(byoc.slybroadcastResultTimeoutMs, 30 * 60_000);
  });

  test('half-configured providers and bad values fail at start, naming the variables', () => {
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig({ ...base, ...env });
      } catch (error) {
        assert.ok(error instanceof ConfigError);
        return error.message;
      }
      assert.fail(`accepted ${JSON.stringify(env)}`);
    };
    assert.match(problems({ SLYBROADCAST_UID: 'agent@example.com' }), /Slybroadcast needs .*missing: SLYBROADCAST_PASSWORD/);
    assert.match(problems({ DROPCOWBOY_KEY: 'k' }), /Drop Cowboy needs .*missing: DROPCOWBOY_SECRET/);
    assert.match(problems({ DROPCOWBOY_WEBHOOK_SECRET: 'w' }), /DROPCOWBOY_WEBHOOK_SECRET is now DROPCOWBOY_WEBHOOK_SECRETS/);
    assert.match(problems({ DROPCOWBOY_URL: 'https://api-v2.dropcowboy.com/rvm' }), /DROPCOWBOY_URL is the API base URL/);
    assert.match(
      problems({ DROPCOWBOY_KEY: 'k', DROPCOWBOY_SECRET: 's', DROPCOWBOY_BYOC: 'sure' }),
      /DROPCOWBOY_BYOC must be true or false/,
    );
    assert.match(problems({ SLYBROADCAST_RESULT_TIMEOUT: 'later' }), /SLYBROADCAST_RESULT_TIMEOUT must look like/);
    assert.match(problems({ SLYBROADCAST_URL: 'ftp://example.com' }), /SLYBROADCAST_URL must be an absolute http\(s\) URL/);
    assert.match(problems({ SANDBOX_VOICEMAIL: 'maybe' }), /SANDBOX_VOICEMAIL must be true or false/);
    assert.match(
      problems({ SLYBROADCAST_UID: 'a@example.com', SLYBROADCAST_PASSWORD: 'pw', SLYBROADCAST_MOBILE_ONLY: 'landlines' }),
      /SLYBROADCAST_MOBILE_ONLY must be true or false/,
    );
    assert.match(problems({ SANDBOX_DELAY: 'soon' }), /SANDBOX_DELAY must look like/);
  });

  describe('with the Sandbox turned off', () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp({ env: { SANDBOX_VOICEMAIL: 'false' } });
    });
    after(() => t.close());

    test('no provider is configured, and a drop is refused', async () => {
      const owner = await createUser(t, 'User');
      const media = await upload(t.app, t.adminKey, owner.id, 'ok.wav', wavFile(6));
      const reply = await asKey(t.app, owner.key).post(`/v3/users/${owner.id}/voicemail_drops`, {
        provider: 'Sandbox',
        media_id: media.id,
        callback_number: '7272329117',
        name: 'Off',
      });
      assertProblem(reply, 400, 'validation');
      assert.match(reply.body.errors.provider[0], /configured: none/);
    });
  });
});
