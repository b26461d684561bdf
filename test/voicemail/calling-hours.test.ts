import assert from 'node:assert/strict';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { checkCallingHours, zonedInstant } from '../../src/voicemail/calling-hours.ts';
import { asKey } from '../support/client.ts';
import {
  deliveriesOf,
  deliveryTo,
  readDrop,
  scheduledDeliveryJobs,
  sendDrop,
  startVoicemailApp,
  type VoicemailApp,
  waitFor,
  waitForDrop,
} from './support/voicemail-app.ts';

/** The next instant, at least a minute ahead, at which a clock in `zone` shows `hour`:`minute`. */
function nextLocal(zone: string, hour: number, minute = 0): Date {
  const soon = Date.now() + 60_000;
  const today = new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(soon);
  const [year, month, day] = today.split('-').map(Number) as [number, number, number];
  for (let d = 0; d <= 2; d++) {
    const at = zonedInstant(zone, year, month, day + d, hour, minute);
    if (at.getTime() > soon) return at;
  }
  throw new Error('no such time in the next days');
}

const HOUR = 3_600_000;

/** Calling hours with the Sandbox, which holds drops like any provider; time is the app's clock. */
describe('calling hours', () => {
  let app: VoicemailApp;
  before(async () => {
    app = await startVoicemailApp();
  });
  after(() => app.close());

  test('a contact in America/Los_Angeles at 06:00 local is held, then sent at 08:00', async () => {
    const sixAm = nextLocal('America/Los_Angeles', 6);
    const eightAm = new Date(sixAm.getTime() + 2 * HOUR);
    app.clock.set(sixAm);
    const drop = await sendDrop(app, 'Sandbox', [{ phone: '213-232-9117', time_zone: 'America/Los_Angeles' }]);

    const held = await waitFor('the delivery to be held', async () => {
      const [delivery] = await deliveriesOf(app.t, drop.id);
      return delivery?.state === 'held' ? delivery : undefined;
    });
    assert.equal(held.next_attempt_at.toISOString(), eightAm.toISOString());
    assert.match(String(held.last_error), /06:0\d in America\/Los_Angeles.*held until/);
    // Not polled: the engine asked to come back exactly when the window opens.
    await waitFor('a delivery job at the opening', async () =>
      (await scheduledDeliveryJobs(app.t, drop.id)).some((at) => at.getTime() === eightAm.getTime()),
    );
    const sending = await readDrop(app, drop.id);
    assert.equal(sending.status, 'Sending');
    assert.equal(sending.reporting.sent, 0);
    assert.equal(Object.keys(sending.reporting).filter((k) => k !== 'date').length, 14, 'reporting keeps its fourteen counters');
    // The deliveries listing says why it waits, and until when.
    const listed = await asKey(app.t.app, app.owner.key).get(`/v3/voicemail_drops/${drop.id}/deliveries`);
    assert.equal(listed.status, 200, listed.raw);
    const [waiting] = listed.body.data;
    assert.match(waiting.waiting_reason, /06:0\d in America\/Los_Angeles.*held until/);
    assert.equal(waiting.next_attempt_at, eightAm.toISOString().replace('.000Z', 'Z'));
    await assert.rejects(access(join(app.t.dataDir, 'voicemail', `${held.id}.json`)), 'nothing reached the provider');

    app.clock.set(eightAm);
    const sent = await waitForDrop(app, drop.id, 'the drop to go out at 08:00', (d) => d.status === 'Sent');
    assert.equal(sent.reporting.sent, 1);
    const delivery = await deliveryTo(app.t, drop.id, '2132329117');
    assert.ok(delivery.sent_at && delivery.sent_at.getTime() >= eightAm.getTime(), 'sent at 08:00 or just after');
    assert.ok(delivery.sent_at.getTime() < eightAm.getTime() + 60_000);
    await waitForDrop(app, drop.id, 'the Sandbox outcome', (d) => d.reporting.delivered === 1);
  });

  test('a number whose area code spans two zones waits for the later opening', async () => {
    // 08:30 in New York is 07:30 in Chicago: 850 (Florida panhandle) numbers may be in either.
    const halfPastEightEastern = nextLocal('America/New_York', 8, 30);
    const nineEastern = new Date(halfPastEightEastern.getTime() + 30 * 60_000);
    app.clock.set(halfPastEightEastern);
    const drop = await sendDrop(app, 'Sandbox', [{ phone: '(850) 232-9117' }, { phone: '(727) 232-9117' }]);

    const eastern = await waitFor('the Eastern-only number to go out', async () => {
      const delivery = await deliveryTo(app.t, drop.id, '7272329117');
      return delivery.state !== 'queued' && delivery.state !== 'sending' ? delivery : undefined;
    });
    assert.notEqual(eastern.state, 'held', 'Tampa (727) is Eastern only: 08:30 is inside its window');
    const panhandle = await waitFor('the 850 number to be held', async () => {
      const delivery = await deliveryTo(app.t, drop.id, '8502329117');
      return delivery.state === 'held' ? delivery : undefined;
    });
    assert.equal(panhandle.next_attempt_at.toISOString(), nineEastern.toISOString(), '08:00 Central');
    assert.match(String(panhandle.last_error), /America\/New_York.*America\/Chicago/);
    assert.equal((await readDrop(app, drop.id)).status, 'Sending');

    app.clock.set(nineEastern);
    const sent = await waitForDrop(app, drop.id, 'the 850 drop to go out', (d) => d.status === 'Sent');
    assert.equal(sent.reporting.sent, 2);
  });
});

describe('the calling window', () => {
  const at = (iso: string) => new Date(iso);

  test('21:00 is the end in most states, 20:00 in Florida, Oklahoma and Washington', () => {
    // 20:30 on a winter evening, local time in each.
    assert.deepEqual(checkCallingHours('2132329117', null, at('2026-01-16T04:30:00Z')), { allowed: true });
    for (const [phone, evening, nextMorning] of [
      ['7272329117', '2026-01-16T01:30:00Z', '2026-01-16T13:00:00Z'],
      ['4052329117', '2026-01-16T02:30:00Z', '2026-01-16T14:00:00Z'],
      ['5092329117', '2026-01-16T04:30:00Z', '2026-01-16T16:00:00Z'],
    ] as const) {
      const verdict = checkCallingHours(phone, null, at(evening));
      assert.equal(verdict.allowed, false, phone);
      assert.equal(!verdict.allowed && verdict.until.toISOString(), at(nextMorning).toISOString(), phone);
    }
    assert.equal(checkCallingHours('2132329117', null, at('2026-01-16T05:00:00Z')).allowed, false, '21:00 itself is outside');
  });

  test("the contact's time zone wins over the area code", () => {
    // 08:30 in New York, 05:30 in Los Angeles.
    assert.equal(checkCallingHours('7272329117', 'America/Los_Angeles', at('2026-01-15T13:30:00Z')).allowed, false);
    assert.equal(checkCallingHours('2132329117', 'America/New_York', at('2026-01-15T13:30:00Z')).allowed, true);
  });

  test('an unknown area code waits for the window that is open in every US zone', () => {
    // 12:00 in New York is 07:00 in Honolulu: held until 08:00 there.
    const verdict = checkCallingHours('2912329117', null, at('2026-01-15T17:00:00Z'));
    assert.equal(!verdict.allowed && verdict.until.toISOString(), '2026-01-15T18:00:00.000Z');
    assert.equal(checkCallingHours('2912329117', null, at('2026-01-15T18:00:00Z')).allowed, true);
    // …and closes at 20:00 Eastern, the earliest end.
    assert.equal(checkCallingHours('2912329117', null, at('2026-01-16T01:00:00Z')).allowed, false);
  });

  test('daylight saving time changes move the opening with the clocks', () => {
    // Sunday 8 March 2026, 02:00 EST becomes 03:00 EDT: 08:00 that morning is 12:00 UTC, not 13:00.
    const verdict = checkCallingHours('7272329117', null, at('2026-03-08T06:30:00Z'));
    assert.equal(!verdict.allowed && verdict.until.toISOString(), '2026-03-08T12:00:00.000Z');
  });
});
