import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * Finding 7 of issue 36: one resend re-queued up to 10,000 events to a URL the user chose, as
 * often as asked (5 calls → 4,235 posts), and at about 10,000 events its one statement ran past
 * the statement timeout (503 every time). Now a call queues one page, a user's endpoints are
 * resent at most WEBHOOK_RESEND_PER_HOUR events an hour (then 429 with Retry-After), and the
 * pages go on from an event, so that events sharing one timestamp (a bulk import's) are each
 * resent once.
 */
const PAGE = 1_000;
const PER_HOUR = 2_500;
const EVENTS = 3_000;

describe('resend is paged and limited', () => {
  let t: TestApp;
  let now = new Date('2026-07-01T12:00:00Z');
  before(async () => {
    // No workers: the deliveries stay queued, so that what each call queues is counted exactly.
    t = await startTestApp({ env: { WEBHOOK_RESEND_PER_HOUR: String(PER_HOUR) }, clock: () => now });
  });
  after(() => t?.close());

  test(`${EVENTS} events of one bulk import: pages of ${PAGE}, ${PER_HOUR} an hour, then 429 until the hour is over`, async () => {
    const agent = await createUser(t, 'User');
    const api = asKey(t.app, agent.key);
    const made = await api.post(`/v3/users/${agent.id}/webhooks`, { url: 'https://hooks.example.com/in', events: ['contact.created'] });
    assert.equal(made.status, 201, made.raw);
    const csv = ['email', ...Array.from({ length: EVENTS }, (_, i) => `bulk-${i}@example.com`)].join('\n');
    const imported = await api.post(`/v3/users/${agent.id}/contacts/import`, csv, { 'content-type': 'text/csv' });
    assert.ok(imported.status < 300, imported.raw);
    const events = await api.get(`/v3/users/${agent.id}/webhook_events?per_page=1`);
    assert.equal(events.body.meta.total, EVENTS);

    const resend = (body: Record<string, unknown>) => api.post(`/v3/webhooks/${made.body.id}/resend`, body);
    const queued: number[] = [];
    let body: Record<string, unknown> = { since: '2026-07-01T00:00:00Z' };
    for (;;) {
      const reply = await resend(body);
      if (reply.status === 429) {
        assertProblem(reply, 429, 'too_many_requests');
        assert.match(reply.body.detail, /2,500 events an hour/);
        assert.equal(Number(reply.headers['retry-after']), 3600, 'the hour began with the first call (the clock stands still)');
        break;
      }
      assert.equal(reply.status, 202, reply.raw);
      queued.push(reply.body.queued);
      assert.ok(reply.body.queued <= PAGE, `one page at most: ${reply.body.queued}`);
      assert.ok(queued.length <= 5, `calls stop being served: ${queued}`);
      body = { since: reply.body.next_since, after_event_id: reply.body.next_after_event_id };
    }
    assert.deepEqual(queued, [PAGE, PAGE, PER_HOUR - 2 * PAGE], 'the hour allows 2,500');

    // A single event counts too.
    const first = (await api.get(`/v3/users/${agent.id}/webhook_events?per_page=1`)).body.data[0].id;
    assertProblem(await resend({ event_id: first }), 429, 'too_many_requests');

    // An hour later the rest: the 500 left and nothing twice, each of the 3,000 deliveries queued once.
    now = new Date(now.getTime() + 3_600_000);
    const rest = await resend(body);
    assert.equal(rest.status, 202, rest.raw);
    assert.equal(rest.body.queued, EVENTS - PER_HOUR);
    assert.equal(rest.body.next_since, null);
    assert.equal(rest.body.next_after_event_id, null);
    const deliveries = await api.get(`/v3/webhooks/${made.body.id}/deliveries?per_page=1`);
    assert.equal(deliveries.body.meta.total, EVENTS, 'one delivery per event, never a second');
  });

  test('a cursor without since, or of another shape, is a 400', async () => {
    const agent = await createUser(t, 'User');
    const api = asKey(t.app, agent.key);
    const made = await api.post(`/v3/users/${agent.id}/webhooks`, { url: 'https://hooks.example.com/in', events: ['contact.created'] });
    assertProblem(await api.post(`/v3/webhooks/${made.body.id}/resend`, { after_event_id: 5 }), 400, 'validation');
    assertProblem(await api.post(`/v3/webhooks/${made.body.id}/resend`, { event_id: 5, after_event_id: 5 }), 400, 'validation');
    assertProblem(await api.post(`/v3/webhooks/${made.body.id}/resend`, { since: '2026-07-01T00:00:00Z', after_event_id: 'x' }), 400);
  });
});
