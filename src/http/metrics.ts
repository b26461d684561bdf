import { timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { AppContext } from '../context.ts';
import { jobQueueSchema } from '../db/job-queue.ts';
import type { App } from './context.ts';
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
  const { db } = ctx.database;
  const register = new Registry();
  collectDefaultMetrics({ register, prefix: 'hopper_' });

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

  new Gauge({
    name: 'hopper_messages',
    help: 'Messages by kind and status',
    labelNames: ['kind', 'status'] as const,
    registers: [register],
    async collect() {
      this.reset();
      for (const [table, kind] of [
        ['voicemail_drops', 'voicemail_drop'],
        ['templated_emails', 'templated_email'],
      ] as const) {
        const { rows } = await sql<{ status: string; n: string }>`
          SELECT status, count(*) AS n FROM ${sql.table(table)} WHERE deleted_at IS NULL GROUP BY status`.execute(db);
        for (const row of rows) this.set({ kind, status: row.status }, Number(row.n));
      }
    },
  });
  new Gauge({
    name: 'hopper_deliveries',
    help: 'Deliveries by channel and state',
    labelNames: ['channel', 'state'] as const,
    registers: [register],
    async collect() {
      this.reset();
      const { rows } = await sql<{ kind: string; state: string; n: string }>`
        SELECT message_kind AS kind, state, count(*) AS n FROM deliveries GROUP BY 1, 2`.execute(db);
      for (const row of rows) this.set({ channel: row.kind, state: row.state }, Number(row.n));
    },
  });
  new Gauge({
    name: 'hopper_deliveries_sent_last_minute',
    help: 'Deliveries handed over in the last minute, by channel (the send rate)',
    labelNames: ['channel'] as const,
    registers: [register],
    async collect() {
      this.reset();
      const since = new Date(ctx.clock().getTime() - 60_000);
      const { rows } = await sql<{ kind: string; n: string }>`
        SELECT message_kind AS kind, count(*) AS n FROM deliveries WHERE sent_at >= ${since} GROUP BY 1`.execute(db);
      for (const row of rows) this.set({ channel: row.kind }, Number(row.n));
    },
  });
  const queueSchema = jobQueueSchema(ctx.config);
  new Gauge({
    name: 'hopper_queue_due_jobs',
    help: 'Jobs due and waiting for a worker, by queue',
    labelNames: ['queue'] as const,
    registers: [register],
    async collect() {
      this.reset();
      for (const row of await dueJobs()) this.set({ queue: row.name }, Number(row.n));
    },
  });
  new Gauge({
    name: 'hopper_queue_oldest_due_job_age_seconds',
    help: 'How long the oldest due job has waited, by queue',
    labelNames: ['queue'] as const,
    registers: [register],
    async collect() {
      this.reset();
      for (const row of await dueJobs()) this.set({ queue: row.name }, Math.max(0, Number(row.age)));
    },
  });
  async function dueJobs() {
    const { rows } = await sql<{ name: string; n: string; age: string }>`
      SELECT name, count(*) AS n, extract(epoch FROM now() - min(start_after)) AS age
      FROM ${sql.table(`${queueSchema}.job`)}
      WHERE state IN ('created', 'retry') AND start_after <= now()
      GROUP BY name`.execute(db);
    return rows;
  }
  new Counter({
    name: 'hopper_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome (delivered, failed)',
    labelNames: ['outcome'] as const,
    registers: [register],
    async collect() {
      this.reset();
      const { rows } = await sql<{ ok: boolean; n: string }>`
        SELECT (status BETWEEN 200 AND 299) IS TRUE AS ok, count(*) AS n FROM webhook_attempts GROUP BY 1`.execute(db);
      for (const row of rows) this.inc({ outcome: row.ok ? 'delivered' : 'failed' }, Number(row.n));
    },
  });
  new Gauge({
    name: 'hopper_webhook_deliveries_pending',
    help: 'Webhook deliveries waiting to be sent or retried',
    registers: [register],
    async collect() {
      const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM webhook_deliveries WHERE state IN ('pending', 'sending')`.execute(
        db,
      );
      this.set(Number(rows[0]?.n ?? 0));
    },
  });
  new Counter({
    name: 'hopper_delivery_events_total',
    help: 'Delivery events received (provider webhooks, inbound mail, tracking) by source and kind',
    labelNames: ['source', 'kind'] as const,
    registers: [register],
    async collect() {
      this.reset();
      const { rows } = await sql<{ source: string; type: string; n: string }>`
        SELECT source, type, count(*) AS n FROM delivery_events GROUP BY 1, 2`.execute(db);
      for (const row of rows) this.inc({ source: row.source, kind: row.type }, Number(row.n));
    },
  });
  new Gauge({
    name: 'hopper_db_pool_connections',
    help: 'PostgreSQL pool connections by state (absent on PGlite)',
    labelNames: ['state'] as const,
    registers: [register],
    collect() {
      const stats = ctx.database.poolStats();
      if (!stats) return;
      this.set({ state: 'total' }, stats.total);
      this.set({ state: 'idle' }, stats.idle);
      this.set({ state: 'waiting' }, stats.waiting);
      this.set({ state: 'max' }, stats.max);
    },
  });

  const expected = Buffer.from(`Bearer ${token}`);
  app.get('/metrics', { config: { public: true }, schema: { hide: true } }, async (request, reply) => {
    const given = Buffer.from(String(request.headers.authorization ?? ''));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new HttpError('unauthorized', 'Send the METRICS_TOKEN as a Bearer token.', { headers: { 'WWW-Authenticate': 'Bearer' } });
    }
    return reply.type(register.contentType).send(await register.metrics());
  });
}
