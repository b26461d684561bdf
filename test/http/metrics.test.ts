import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { startTestApp } from '../support/test-app.ts';
import { tools } from '../support/tools.ts';

const TOKEN = 'metrics-token-0123456789abcdef';

/** Parses the Prometheus text exposition format (0.0.4) strictly: every line is a comment, HELP, TYPE or a sample. */
function parseExposition(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  const typed = new Set<string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      if (meta[1] === 'TYPE') {
        assert.match(meta[3] ?? '', /^(counter|gauge|histogram|summary|untyped)$/, line);
        typed.add(meta[2] as string);
      }
      continue;
    }
    // Values as Prometheus reads them (Go's ParseFloat): NaN and Inf in any letter case — prom-client
    // writes `Nan`, e.g. for the event-loop lag before its first sample.
    const sample =
      /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.eE+-]+|[Nn][Aa][Nn]|[+-][Ii][Nn][Ff])( -?\d+)?$/.exec(
        line,
      );
    assert.ok(sample, `not a valid exposition line: ${line}`);
    const name = sample[1] as string;
    const family = name.replace(/_(bucket|sum|count|total|created)$/, '');
    assert.ok(typed.has(name) || typed.has(family), `sample before its TYPE: ${line}`);
    samples.set(`${name}${sample[2] ?? ''}`, Number(sample[3]));
  }
  return samples;
}

describe('GET /metrics', () => {
  let s: SendingApp;
  before(async () => {
    s = await startSendingApp({ METRICS_TOKEN: TOKEN });
  });
  after(() => s?.close());

  const scrape = async () => {
    const reply = await asKey(s.t.app, TOKEN).get('/metrics');
    assert.equal(reply.status, 200, reply.raw);
    assert.match(String(reply.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    return parseExposition(reply.raw);
  };

  test('answers a bearer of METRICS_TOKEN only', async () => {
    assert.equal((await asKey(s.t.app, undefined).get('/metrics')).status, 401);
    assert.equal((await asKey(s.t.app, 'wrong-token-wrong-token-wrong').get('/metrics')).status, 401);
    assert.equal((await asKey(s.t.app, s.t.adminKey).get('/metrics')).status, 401, 'an API key is not the metrics token');
  });

  test('parses as the text exposition format and moves when a message is sent', async () => {
    const before = await scrape();
    const sentBefore = before.get('hopper_messages{kind="templated_email",status="Sent"}') ?? 0;
    const people = await audience(s, 2);
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    await waitForStatus(s, email.id, ['Sent']);
    const now = await waitFor('the metrics to move', async () => {
      const m = await scrape();
      return (m.get('hopper_messages{kind="templated_email",status="Sent"}') ?? 0) === sentBefore + 1 && m;
    });
    assert.ok((now.get('hopper_deliveries{channel="templated_email",state="sent"}') ?? 0) >= 2);
    assert.ok((now.get('hopper_deliveries_sent_last_minute{channel="templated_email"}') ?? 0) >= 2);
    const created = [...now.entries()].find(
      ([k]) => k.startsWith('hopper_http_request_duration_seconds_count{') && k.includes('route="/v3/users/:user_id/templated_emails"'),
    );
    assert.ok(created && created[1] >= 1, 'the create request was timed');
    assert.ok(now.has('hopper_nodejs_eventloop_lag_seconds'), 'event-loop lag');
  });
  test('webhook lag, oldest pending age, disabled endpoints, delivery errors by kind, and pool figures that add up', async () => {
    const before = await scrape();
    for (const name of [
      'hopper_webhook_delivery_lag_p50_seconds',
      'hopper_webhook_delivery_lag_p99_seconds',
      'hopper_webhook_oldest_pending_age_seconds',
      'hopper_webhook_endpoints_disabled',
    ]) {
      assert.ok(before.has(name), name);
    }
    // A disabled endpoint with an event waiting for it does not count as pending; a disabled one is counted.
    const disabled = await s.api.post(`/v3/users/${s.owner}/webhooks`, {
      url: 'https://crm.example.com/hooks',
      events: ['contact.created'],
      enabled: false,
    });
    assert.equal(disabled.status, 201, disabled.raw);
    const after = await scrape();
    assert.equal(after.get('hopper_webhook_endpoints_disabled'), (before.get('hopper_webhook_endpoints_disabled') ?? 0) + 1);
    // A refused recipient: an SMTP error, counted by channel, source and kind.
    s.sink.behave({ recipient: (address) => (address.startsWith('refused') ? { code: 550, message: '5.1.1 No such user' } : undefined) });
    try {
      const people = await audience(s, 1, () => ({ email: `refused-${Date.now()}@example.com` }));
      const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
      await waitForStatus(s, email.id, ['Sent', 'Failed']);
      const m = await waitFor('the error counted', async () => {
        const now = await scrape();
        return [...now.keys()].some((k) => k.startsWith('hopper_delivery_errors{channel="templated_email"')) && now;
      });
      const errors = [...m.entries()].filter(([k]) => k.startsWith('hopper_delivery_errors{'));
      assert.ok(
        errors.some(([k, v]) => /source="smtp"/.test(k) && v >= 1),
        JSON.stringify(errors),
      );
    } finally {
      s.sink.behave({});
    }
    if (process.env.DATABASE_URL) {
      const pool = (state: string) => after.get(`hopper_db_pool_connections{state="${state}"}`) ?? Number.NaN;
      assert.ok(pool('idle') <= pool('total') && pool('total') <= pool('max'), 'idle ≤ total ≤ max');
      assert.equal(pool('in_use') + pool('idle'), pool('total'));
    }
  });

  test("promtool check metrics finds nothing to say (Debian's prometheus package)", { skip: tools.promtool.skip }, async () => {
    const reply = await asKey(s.t.app, TOKEN).get('/metrics');
    const checked = spawnSync(tools.promtool.path as string, ['check', 'metrics'], { input: reply.raw, encoding: 'utf8' });
    assert.equal(checked.error, undefined);
    assert.equal(checked.status, 0, `promtool check metrics: ${checked.stdout}${checked.stderr}`);
    assert.equal(`${checked.stdout}${checked.stderr}`.trim(), '');
  });
});

describe('GET /metrics without METRICS_TOKEN', () => {
  test('does not exist', async () => {
    const t = await startTestApp();
    try {
      assert.equal((await asKey(t.app, undefined).get('/metrics')).status, 404);
    } finally {
      await t.close();
    }
  });
});
