import { timingSafeEqual } from 'node:crypto';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { AppContext } from '../app-context.ts';
import { dueJobs } from '../db/job-queue.ts';
import { pausedSenders } from '../identity/users.ts';
import { countMessagesByStatus } from '../messages/message-tables.ts';
import { ratesOfSenders } from '../sending/brakes.ts';
import { countDeliveriesByState, countDeliveriesSentSince, countDeliveryErrors } from '../sending/deliveries.ts';
import { countDeliveryEvents } from '../sending/delivery-events.ts';
import { countWebhookAttempts, countWebhookDeliveriesPending, webhookLag } from '../webhooks/deliveries.ts';
import { countDisabledEndpoints } from '../webhooks/endpoints.ts';
import type { App } from './fastify-types.ts';
import { HttpError } from './problems.ts';

/**
 * Prometheus metrics at `GET /metrics` (prom-client), answered only to a bearer of METRICS_TOKEN
 * and absent when it is unset. Request durations are measured by this process; everything about
 * messages, deliveries, queues and webhooks is read from the database when scraped, so any API
 * process tells the state of the whole installation, whichever process did the work.
 */
export async function registerMetrics(app: App, ctx: AppContext): Promise<void> {
  const token = ctx.config.metricsToken;
  if (!token) return;
  const register = new Registry();
  collectDefaultMetrics({ register, prefix: 'hopper_' });
  // prom-client's totals of active handles, requests and resources are gauges named `_total`,
  // which `promtool check metrics` refuses (a `_total` is a counter's); the labelled gauges of the
  // same names without `_total` hold the same figures by type.
  for (const name of [
    'hopper_nodejs_active_handles_total',
    'hopper_nodejs_active_requests_total',
    'hopper_nodejs_active_resources_total',
  ]) {
    register.removeSingleMetric(name);
  }
  measureRequests(app, register);
  for (const metric of [...databaseMetrics(ctx), ...senderMetrics(ctx)]) readWhenScraped(register, metric);
  const pool = poolConnections(register);
  serveMetrics(app, register, token, () => pool.snapshot(ctx.database.poolStats()));
}

/** HTTP request durations by route and status, as this process served them. */
function measureRequests(app: App, register: Registry): void {
  const requests = new Histogram({
    name: 'hopper_http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [register],
  });
  app.addHook('onResponse', async (request, reply) => {
    requests.observe(
      { method: request.method, route: request.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });
}

/** A metric read from the database at each scrape: its values, by label. */
interface DatabaseMetric {
  name: string;
  help: string;
  /** Totals that only grow are counters; the rest gauges. */
  type: 'gauge' | 'counter';
  labelNames: readonly string[];
  read(): Promise<{ labels: Record<string, string>; value: number }[]>;
}

/** Messages, deliveries, queues, webhooks and delivery events, as the database holds them now. */
function databaseMetrics(ctx: AppContext): DatabaseMetric[] {
  const { db } = ctx.database;
  return [
    {
      name: 'hopper_messages',
      help: 'Messages by kind and status',
      type: 'gauge',
      labelNames: ['kind', 'status'],
      read: async () => (await countMessagesByStatus(db)).map((r) => ({ labels: { kind: r.kind, status: r.status }, value: r.n })),
    },
    {
      name: 'hopper_deliveries',
      help: 'Deliveries by channel and state',
      type: 'gauge',
      labelNames: ['channel', 'state'],
      read: async () => (await countDeliveriesByState(db)).map((r) => ({ labels: { channel: r.kind, state: r.state }, value: r.n })),
    },
    {
      name: 'hopper_deliveries_sent_last_minute',
      help: 'Deliveries handed over in the last minute, by channel (the send rate)',
      type: 'gauge',
      labelNames: ['channel'],
      read: async () =>
        (await countDeliveriesSentSince(db, new Date(ctx.clock().getTime() - 60_000))).map((r) => ({
          labels: { channel: r.kind },
          value: r.n,
        })),
    },
    {
      name: 'hopper_queue_due_jobs',
      help: 'Jobs due and waiting for a worker, by queue',
      type: 'gauge',
      labelNames: ['queue'],
      read: async () => (await dueJobs(db, ctx.config)).map((r) => ({ labels: { queue: r.name }, value: r.n })),
    },
    {
      name: 'hopper_queue_oldest_due_job_age_seconds',
      help: 'How long the oldest due job has waited, by queue',
      type: 'gauge',
      labelNames: ['queue'],
      read: async () => (await dueJobs(db, ctx.config)).map((r) => ({ labels: { queue: r.name }, value: r.ageSeconds })),
    },
    {
      name: 'hopper_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome (delivered, failed)',
      type: 'counter',
      labelNames: ['outcome'],
      read: async () =>
        (await countWebhookAttempts(db)).map((r) => ({ labels: { outcome: r.delivered ? 'delivered' : 'failed' }, value: r.n })),
    },
    {
      name: 'hopper_webhook_deliveries_pending',
      help: 'Webhook deliveries waiting to be sent or retried',
      type: 'gauge',
      labelNames: [],
      read: async () => [{ labels: {}, value: await countWebhookDeliveriesPending(db) }],
    },
    ...(['p50', 'p99'] as const).map(
      (quantile): DatabaseMetric => ({
        name: `hopper_webhook_delivery_lag_${quantile}_seconds`,
        help: `Delay from an event to its delivery, ${quantile} of the webhook deliveries of the last five minutes (0 when none)`,
        type: 'gauge',
        labelNames: [],
        read: async () => [{ labels: {}, value: (await webhookLag(db, ctx.clock()))[quantile] ?? 0 }],
      }),
    ),
    {
      name: 'hopper_webhook_oldest_pending_age_seconds',
      help: 'Age of the oldest webhook delivery still waiting for an enabled endpoint (0 when none waits)',
      type: 'gauge',
      labelNames: [],
      read: async () => [{ labels: {}, value: (await webhookLag(db, ctx.clock())).oldestPendingSeconds }],
    },
    {
      name: 'hopper_webhook_endpoints_disabled',
      help: 'Webhook endpoints disabled (410 Gone, or failing for WEBHOOK_RETRY_FOR)',
      type: 'gauge',
      labelNames: [],
      read: async () => [{ labels: {}, value: await countDisabledEndpoints(db) }],
    },
    {
      name: 'hopper_delivery_errors',
      help: 'Deliveries failed, bounced, dropped or deferred, by channel, by who said so (smtp, dsn, a relay, a voicemail provider, hopper) and by kind',
      type: 'gauge',
      labelNames: ['channel', 'source', 'kind'],
      read: async () =>
        (await countDeliveryErrors(db)).map((r) => ({
          labels: { channel: r.kind, source: r.source, kind: r.classification },
          value: r.n,
        })),
    },
    {
      name: 'hopper_delivery_events_total',
      help: 'Delivery events received (provider webhooks, inbound mail, tracking) by source and kind',
      type: 'counter',
      labelNames: ['source', 'kind'],
      read: async () => (await countDeliveryEvents(db)).map((r) => ({ labels: { source: r.source, kind: r.type }, value: r.n })),
    },
  ];
}

/** Each user's sending over the brakes' window, and the users the brakes paused (docs/sending.md, "Brakes"). */
function senderMetrics(ctx: AppContext): DatabaseMetric[] {
  const { db } = ctx.database;
  const rates = () => ratesOfSenders(db, ctx.config.brakes, ctx.clock());
  return [
    {
      name: 'hopper_user_sent',
      help: 'Emails and drops a user handed over in the brakes window (BRAKE_WINDOW, 30 days)',
      type: 'gauge',
      labelNames: ['user_id'],
      read: async () => (await rates()).map((r) => ({ labels: { user_id: String(r.userId) }, value: r.sent })),
    },
    {
      name: 'hopper_user_complaint_rate',
      help: 'Spam reports per email a user had accepted in the brakes window (a fraction)',
      type: 'gauge',
      labelNames: ['user_id'],
      read: async () => (await rates()).map((r) => ({ labels: { user_id: String(r.userId) }, value: r.complaintRate })),
    },
    {
      name: 'hopper_user_hard_bounce_rate',
      help: 'Hard bounces per email a user sent in the brakes window (a fraction)',
      type: 'gauge',
      labelNames: ['user_id'],
      read: async () => (await rates()).map((r) => ({ labels: { user_id: String(r.userId) }, value: r.hardBounceRate })),
    },
    {
      name: 'hopper_user_sending_paused',
      help: 'Users whose sending the brakes paused (1), by reason',
      type: 'gauge',
      labelNames: ['user_id', 'reason'],
      read: async () =>
        (await pausedSenders(db)).map((u) => ({ labels: { user_id: String(u.id), reason: u.sending_paused_reason ?? '' }, value: 1 })),
    },
  ];
}

/** Registers a database metric: reset and read again at every scrape. */
function readWhenScraped(register: Registry, metric: DatabaseMetric): void {
  const { name, help, labelNames, read } = metric;
  if (metric.type === 'counter') {
    new Counter({
      name,
      help,
      labelNames,
      registers: [register],
      async collect() {
        this.reset();
        for (const { labels, value } of await read()) this.inc(labels, value);
      },
    });
  } else {
    new Gauge({
      name,
      help,
      labelNames,
      registers: [register],
      async collect() {
        this.reset();
        for (const { labels, value } of await read()) this.set(labels, value);
      },
    });
  }
}

type PoolStats = { total: number; idle: number; waiting: number; max: number } | undefined;

/**
 * The PostgreSQL pool of this process (absent on PGlite), as it was when the scrape arrived: read
 * while the scrape's own queries ran, it counted them (waiting 8 with idle 1: queries queued a
 * moment before a connection came back). `in_use` is total − idle, so in_use + idle = total ≤ max.
 */
function poolConnections(register: Registry): { snapshot(stats: PoolStats): void } {
  let taken: PoolStats;
  new Gauge({
    name: 'hopper_db_pool_connections',
    help: 'PostgreSQL pool connections by state when the scrape arrived (absent on PGlite)',
    labelNames: ['state'] as const,
    registers: [register],
    collect() {
      this.reset();
      if (!taken) return;
      const total = Math.min(taken.total, taken.max);
      const idle = Math.min(taken.idle, total);
      this.set({ state: 'total' }, total);
      this.set({ state: 'idle' }, idle);
      this.set({ state: 'in_use' }, total - idle);
      this.set({ state: 'waiting' }, taken.waiting);
      this.set({ state: 'max' }, taken.max);
    },
  });
  return {
    snapshot(stats) {
      taken = stats;
    },
  };
}

function serveMetrics(app: App, register: Registry, token: string, beforeScrape: () => void): void {
  const expected = Buffer.from(`Bearer ${token}`);
  app.get('/metrics', { config: { public: true }, schema: { hide: true } }, async (request, reply) => {
    const given = Buffer.from(String(request.headers.authorization ?? ''));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new HttpError('unauthorized', 'Send the METRICS_TOKEN as a Bearer token.', { headers: { 'WWW-Authenticate': 'Bearer' } });
    }
    beforeScrape();
    return reply.type(register.contentType).send(await register.metrics());
  });
}
