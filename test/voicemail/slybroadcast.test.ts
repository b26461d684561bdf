import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { assertProblem } from '../support/factories.ts';
import { FakeSlybroadcast } from './support/fake-slybroadcast.ts';
import {
  deliveriesOf,
  deliveryTo,
  postHttps,
  sendDrop,
  startVoicemailApp,
  type VoicemailApp,
  waitFor,
  waitForDrop,
} from './support/voicemail-app.ts';

const ACCOUNT = { uid: 'agent@example.com', password: 'sly-pa$$word&=1' };

/** Slybroadcast against a local gateway that speaks its documented protocol. */
describe('Slybroadcast', () => {
  let app: VoicemailApp;
  let sly: FakeSlybroadcast;
  const logs: string[] = [];
  before(async () => {
    const logStream = new PassThrough();
    logStream.on('data', (chunk: Buffer) => logs.push(chunk.toString('utf8')));
    // The fake needs Hopper's certificate and Hopper the fake's URL: start it, then tell it the CA.
    sly = new FakeSlybroadcast(ACCOUNT, '');
    await sly.listen();
    app = await startVoicemailApp(
      { SLYBROADCAST_UID: ACCOUNT.uid, SLYBROADCAST_PASSWORD: ACCOUNT.password, SLYBROADCAST_URL: sly.url, LOG_LEVEL: 'info' },
      logStream,
    );
    sly.trust(app.ca);
  });
  after(async () => {
    await app.close();
    await sly.close();
  });

  test('a drop to a tag of three contacts is Sent with sent: 3, then delivered: 2, failed: 1 from dispositions', async () => {
    const phones = ['7272329117', '7272329118', '7272329119'];
    const drop = await sendDrop(
      app,
      'Slybroadcast',
      phones.map((phone) => ({ phone })),
    );
    const sent = await waitForDrop(app, drop.id, 'the drop to be handed over', (d) => d.status === 'Sent');
    assert.equal(sent.reporting.sent, 3);
    assert.equal(sent.reporting.delivered, 0);

    // One number per submission, with the documented fields.
    assert.deepEqual(sly.drops.map((d) => d.fields.c_phone).sort(), phones);
    const token = new URL(sly.drops[0]?.fields.c_dispo_url as string).pathname.split('/').pop();
    assert.ok(token && token.length >= 32, 'an unguessable token');
    for (const submitted of sly.drops) {
      assert.match(submitted.contentType, /^application\/x-www-form-urlencoded/);
      assert.deepEqual(submitted.fields, {
        c_uid: ACCOUNT.uid,
        c_password: ACCOUNT.password,
        c_phone: submitted.fields.c_phone,
        c_url: drop.media.full_url,
        c_audio: 'wav',
        c_callerID: '7272329117',
        c_date: 'now',
        c_dispo_url: `${app.publicUrl}/v3/webhooks/slybroadcast/${token}`,
      });
      assert.ok(submitted.audioBytes > 90_000, 'the gateway downloaded the audio from the public URL');
      const delivery = await deliveryTo(app.t, drop.id, submitted.fields.c_phone as string);
      assert.equal(delivery.provider_message_id, submitted.sessionId, 'both session id spellings are read');
      assert.equal(delivery.state, 'sent');
    }

    // Several lines in one post, one of them quoted; then a failure on its own.
    const [a, b, c] = phones as [string, string, string];
    const quotedFields = sly
      .line(b, 'OK')
      .split('|')
      .map((field) => `"${field}"`)
      .join('|');
    const first = await sly.dispose([`"${sly.line(a, 'OK')}"`, quotedFields]);
    assert.deepEqual([first.status, first.body], [200, 'OK']);
    const second = await sly.dispose([sly.line(c, 'FAILED', 'Mailbox full')]);
    assert.deepEqual([second.status, second.body], [200, 'OK']);

    const done = await waitForDrop(app, drop.id, 'the dispositions to count', (d) => d.reporting.delivered + d.reporting.failed === 3);
    assert.equal(done.reporting.delivered, 2);
    assert.equal(done.reporting.failed, 1);
    assert.equal(done.reporting.sent, 3);
    assert.equal((await deliveryTo(app.t, drop.id, a)).state, 'delivered');
    const failed = await deliveryTo(app.t, drop.id, c);
    assert.equal(failed.state, 'failed');
    const event = await app.t.database.db
      .selectFrom('delivery_events')
      .selectAll()
      .where('delivery_id', '=', failed.id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(
      [event.source, event.type, event.detail, event.event_id],
      ['slybroadcast', 'failed', 'Mailbox full', sly.dropTo(c).sessionId],
    );
    // delivery_time is Eastern: 13:05:09 EST.
    assert.equal(event.occurred_at.toISOString(), '2026-01-15T18:05:09.000Z');

    // Duplicates and malformed lines are answered OK and change nothing.
    const replay = await sly.dispose([sly.line(a, 'OK'), sly.line(c, 'FAILED', 'Mailbox full')]);
    assert.deepEqual([replay.status, replay.body], [200, 'OK']);
    const junk = await sly.dispose([
      'not a disposition',
      '||||',
      `${sly.dropTo(a).sessionId}|not-a-phone|OK`,
      '999999|7272329117|OK|||',
      `${sly.dropTo(b).sessionId}|7272320000|FAILED|wrong number||`,
    ]);
    assert.deepEqual([junk.status, junk.body], [200, 'OK']);
    const empty = await postHttps(
      sly.drops[0]?.fields.c_dispo_url as string,
      '',
      { 'content-type': 'application/x-www-form-urlencoded' },
      app.ca,
    );
    assert.deepEqual([empty.status, empty.body], [200, 'OK']);
    const after = (await asKey(app.t.app, app.owner.key).get(`/v3/voicemail_drops/${drop.id}`)).body;
    assert.deepEqual(after.reporting, done.reporting);
    assert.equal((await deliveryTo(app.t, drop.id, b)).state, 'delivered');
  });

  test('a wrong token is refused with 403; JSON API routes still refuse form bodies', async () => {
    const wrong = await postHttps(
      `${app.publicUrl}/v3/webhooks/slybroadcast/not-the-token`,
      'var=1|7272329117|OK|||',
      {
        'content-type': 'application/x-www-form-urlencoded',
      },
      app.ca,
    );
    assert.equal(wrong.status, 403);
    assert.equal(JSON.parse(wrong.body).status, 403);
    const form = await asKey(app.t.app, app.t.adminKey).post('/v3/teams', 'name=Sales', {
      'content-type': 'application/x-www-form-urlencoded',
    });
    assertProblem(form, 415, 'unsupported_media_type');
  });

  test("an ERROR reply fails that delivery with the provider's reason; the others go out", async () => {
    sly.behave('7272329122', { error: 'Number is on the Do Not Call list' });
    const drop = await sendDrop(app, 'Slybroadcast', [{ phone: '7272329121' }, { phone: '7272329122' }, { phone: '7272329123' }]);
    const sent = await waitForDrop(app, drop.id, 'the drop to finish', (d) => d.status === 'Sent');
    assert.equal(sent.reporting.sent, 2);
    assert.equal(sent.reporting.failed, 1);
    const refused = await deliveryTo(app.t, drop.id, '7272329122');
    assert.equal(refused.state, 'failed');
    assert.equal(refused.last_error, 'Slybroadcast refused the drop: Number is on the Do Not Call list');
    assert.equal(refused.attempts, 1, 'not retried');
  });

  test('a provider that is down (connection refused, then 503) is retried until it answers', async () => {
    const port = sly.port;
    await sly.close();
    sly.behave('7272329132', { status: 503 }, { status: 503 });
    const before = sly.attempts.length;
    const drop = await sendDrop(app, 'Slybroadcast', [{ phone: '7272329131' }, { phone: '7272329132' }]);
    const deferred = await waitFor('a retry to be planned', async () => {
      const rows = await deliveriesOf(app.t, drop.id);
      return rows.length === 2 && rows.every((r) => r.state === 'deferred') ? rows : undefined;
    });
    for (const row of deferred) assert.match(String(row.last_error), /Slybroadcast could not be reached: ECONNREFUSED/);
    await sly.listen(port);

    const sent = await waitForDrop(app, drop.id, 'the drop to go out once the gateway is back', (d) => d.status === 'Sent');
    assert.equal(sent.reporting.sent, 2);
    assert.equal(sent.reporting.failed, 0);
    assert.ok(sent.reporting.deferred >= 4, `deferred ${sent.reporting.deferred}`);
    assert.deepEqual(
      sly.attempts.slice(before).filter((p) => p === '7272329132'),
      ['7272329132', '7272329132', '7272329132'],
      'two 503s, then accepted',
    );
    const delivery = await deliveryTo(app.t, drop.id, '7272329132');
    assert.equal(delivery.provider_message_id, sly.dropTo('7272329132').sessionId);
    assert.equal(sly.drops.filter((d) => d.fields.c_phone === '7272329132').length, 1, 'dropped once');
  });

  test('neither the password nor the callback token reaches the log', async () => {
    const token = new URL(sly.drops[0]?.fields.c_dispo_url as string).pathname.split('/').pop() as string;
    const text = logs.join('');
    assert.match(text, /webhooks\/slybroadcast\/\[redacted\]/, 'callbacks are logged, with the token redacted');
    assert.ok(!text.includes(ACCOUNT.password), 'password logged');
    assert.ok(!text.includes(encodeURIComponent(ACCOUNT.password)), 'password logged (encoded)');
    assert.ok(!text.includes(token), 'token logged');
  });
});
