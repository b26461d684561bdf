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
  readDrop,
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
      {
        SLYBROADCAST_UID: ACCOUNT.uid,
        SLYBROADCAST_PASSWORD: ACCOUNT.password,
        SLYBROADCAST_URL: sly.url,
        // Short, so a lost disposition is asked about within the test (the default is 2 h); not much
        // shorter, so that a cancelled session still has status checks left to show (6 in all).
        SLYBROADCAST_RESULT_TIMEOUT: '500ms',
        // Retries from 100 ms: a gateway that is down, then answers 503 twice, is retried four times or more.
        SEND_RETRY_BASE: '100ms',
        LOG_LEVEL: 'info',
      },
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
        c_dispo_url: `${app.publicUrl}/v3/callbacks/slybroadcast/${token}`,
        // SLYBROADCAST_MOBILE_ONLY is on by default: Slybroadcast removes landlines itself.
        mobile_only: '1',
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
    // The refusal is classified like a disposition: a Do-Not-Call hit suppresses the number.
    const listed = (await asKey(app.t.app, app.owner.key).get(`/v3/voicemail_drops/${drop.id}/deliveries`)).body.data as any[];
    const outcome = listed.find((d) => d.address === '7272329122').outcome;
    assert.deepEqual([outcome.classification, outcome.permanent, outcome.code, outcome.source], ['dnc', true, 'ERROR', 'slybroadcast']);
    const contactId = listed.find((d) => d.address === '7272329122').contact_id;
    const contact = (await asKey(app.t.app, app.owner.key).get(`/v3/contacts/${contactId}`)).body;
    assert.equal(contact.phone_suppression.reason, 'dnc');
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

  test('cancelling a Sending drop stops each session Slybroadcast still holds; a failed stop is logged, not fatal', async () => {
    // The third contact's own time zone is in the night: held, so the drop is still Sending.
    const drop = await sendDrop(app, 'Slybroadcast', [
      { phone: '7272329151' },
      { phone: '7272329152' },
      { phone: '7272329153', time_zone: 'Asia/Tokyo' },
    ]);
    await waitFor('two handed over, one held', async () => {
      const rows = await deliveriesOf(app.t, drop.id);
      const states = rows.map((r) => r.state).sort();
      return JSON.stringify(states) === JSON.stringify(['held', 'sent', 'sent']) ? rows : undefined;
    });
    const listed = (await asKey(app.t.app, app.owner.key).get(`/v3/voicemail_drops/${drop.id}/deliveries`)).body.data as any[];
    const held = listed.find((d) => d.address === '7272329153');
    assert.match(held.waiting_reason, /Asia\/Tokyo.*held until/);
    assert.ok(held.next_attempt_at > new Date().toISOString());
    const waiting = listed.find((d) => d.address === '7272329151');
    assert.equal(waiting.waiting_reason, "Handed over: waiting for Slybroadcast's result");

    const sessions = ['7272329151', '7272329152'].map((phone) => sly.dropTo(phone).sessionId);
    sly.failStop.add(sessions[1] as string);
    const cancel = await asKey(app.t.app, app.owner.key).put(`/v3/voicemail_drops/${drop.id}`, { status: 'Cancelled' });
    assert.equal(cancel.status, 200, cancel.raw);
    assert.equal(cancel.body.status, 'Cancelled');
    const stops = await waitFor('a stop per session', async () => {
      const seen = sly.controls.filter((c) => c.option === 'stop' && sessions.includes(c.fields.session_id ?? ''));
      return seen.length >= 2 ? seen : undefined;
    });
    assert.deepEqual(stops.map((c) => c.fields.session_id).sort(), [...sessions].sort());
    await waitFor('the failed stop to be logged', async () =>
      logs.join('').includes('Slybroadcast session not stopped') ? true : undefined,
    );
    const after = await readDrop(app, drop.id);
    assert.equal(after.status, 'Cancelled');
    assert.equal(sly.attempts.filter((p) => p === '7272329153').length, 0, 'the held number never went out');

    // A stopped session is not asked about again (checks run every half-second here); one whose stop failed still is.
    // A check already under way when the stop landed may still ask once, but it plans no next check.
    const stoppedAt = sly.controls.findIndex((c) => c.option === 'stop' && c.fields.session_id === sessions[0]);
    const askedAfterStop = (session: string | undefined) =>
      sly.controls.slice(stoppedAt).filter((c) => c.option === 'callstatus' && c.fields.session_id === session);
    await waitFor('three more rounds of status checks', async () => (askedAfterStop(sessions[1]).length >= 3 ? true : undefined));
    assert.ok(askedAfterStop(sessions[0]).length <= 1, 'at most the check under way when the stop landed');
    const submission = await app.t.database.db
      .selectFrom('provider_submissions')
      .select('next_check_at')
      .where('delivery_id', '=', (await deliveryTo(app.t, drop.id, '7272329151')).id)
      .executeTakeFirstOrThrow();
    assert.equal(submission.next_check_at, null, 'no check planned for the stopped session');
  });

  test('callstatus answered in the session_id= form, with five columns: the result and its delivery time are read', async () => {
    sly.callStatus.set('7272329171', 'OK');
    sly.callStatusPrefixed.add('7272329171');
    const drop = await sendDrop(app, 'Slybroadcast', [{ phone: '7272329171' }]);
    const done = await waitForDrop(app, drop.id, 'the status check to recover the result', (d) => d.reporting.delivered === 1);
    assert.equal(done.reporting.failed, 0);
    const session = sly.dropTo('7272329171').sessionId;
    // Answered once: the result ends the checks.
    assert.equal(sly.controls.filter((c) => c.option === 'callstatus' && c.fields.session_id === session).length, 1);
    const listed = (await asKey(app.t.app, app.owner.key).get(`/v3/voicemail_drops/${drop.id}/deliveries`)).body.data as any[];
    const delivered = listed[0];
    assert.equal(delivered.state, 'delivered');
    // 13:05:09 Eastern (EST) on 2026-01-15, the line's delivery time.
    assert.equal(delivered.delivered_at, '2026-01-15T18:05:09Z');
    assert.deepEqual(
      [delivered.outcome.classification, delivered.outcome.code, delivered.outcome.source],
      ['delivered', 'OK', 'slybroadcast'],
    );
  });

  test('a disposition that never comes is asked for (callstatus) after SLYBROADCAST_RESULT_TIMEOUT; 6 unanswered asks leave it sent', async () => {
    sly.callStatus.set('7272329161', 'FAILED|Mailbox full');
    const drop = await sendDrop(app, 'Slybroadcast', [{ phone: '7272329161' }, { phone: '7272329162' }]);
    const done = await waitForDrop(app, drop.id, 'the status check to recover the result', (d) => d.reporting.failed === 1);
    assert.deepEqual([done.reporting.sent, done.reporting.delivered, done.reporting.failed], [2, 0, 1]);
    const recovered = await deliveryTo(app.t, drop.id, '7272329161');
    assert.equal(recovered.state, 'failed');
    const session = sly.dropTo('7272329161').sessionId;
    const asked = sly.controls.filter((c) => c.option === 'callstatus' && c.fields.session_id === session);
    assert.deepEqual(asked[0]?.fields, { session_id: session, c_phone: '7272329161' });
    const event = await app.t.database.db
      .selectFrom('delivery_events')
      .selectAll()
      .where('delivery_id', '=', recovered.id)
      .executeTakeFirstOrThrow();
    assert.deepEqual([event.source, event.event_id, event.type, event.detail], ['slybroadcast', session, 'failed', 'Mailbox full']);
    // The disposition arriving after all is the same event: counted once.
    const late = await sly.dispose([sly.line('7272329161', 'FAILED', 'Mailbox full')]);
    assert.equal(late.status, 200);

    // The other number never gets an answer: asked six times, then left sent, nothing planned.
    const other = await deliveryTo(app.t, drop.id, '7272329162');
    await waitFor(
      'six status checks',
      async () => {
        const row = await app.t.database.db
          .selectFrom('provider_submissions')
          .selectAll()
          .where('delivery_id', '=', other.id)
          .executeTakeFirstOrThrow();
        return row.checks === 6 && row.next_check_at === null ? row : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const otherSession = sly.dropTo('7272329162').sessionId;
    assert.equal(sly.controls.filter((c) => c.option === 'callstatus' && c.fields.session_id === otherSession).length, 6);
    assert.equal((await deliveryTo(app.t, drop.id, '7272329162')).state, 'sent');
    const final = await readDrop(app, drop.id);
    assert.deepEqual([final.reporting.delivered, final.reporting.failed], [0, 1]);
    const listed = (await asKey(app.t.app, app.owner.key).get(`/v3/voicemail_drops/${drop.id}/deliveries`)).body.data as any[];
    const stillSent = listed.find((d) => d.address === '7272329162');
    assert.deepEqual([stillSent.waiting_reason, stillSent.next_attempt_at], ["Handed over: waiting for Slybroadcast's result", null]);
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
