import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { fromKysely, fromPglite, PgBoss } from 'pg-boss';
import type { Config } from '../config.ts';
import type { DatabaseHandle, Db } from './database.ts';
import type { MessageKind } from './schema.ts';

/**
 * The job queue (pg-boss) on the application database: PostgreSQL, or PGlite through pg-boss's
 * PGlite adapter. Two kinds of job drive sending:
 *
 * - `message-due`: a message reached its send time. Enqueued in the same transaction as the
 *   status change that schedules it, with `startAfter` = `send_at`. The job names the send time
 *   it was made for, so a job left behind by a reschedule, an unschedule or a delete finds the
 *   message changed and does nothing — no job ever needs cancelling.
 * - `message-deliver`: work through a message's deliveries. Any number of these run at once,
 *   across processes; each claims deliveries row by row (see deliveries.ts).
 * - `webhook-send`: send an endpoint's due webhook deliveries (webhooks/webhook-worker.ts). One job
 *   per endpoint is queued and one runs at a time (policy `stately`, keyed by the endpoint).
 */
export const QUEUES = { due: 'message-due', deliver: 'message-deliver', webhook: 'webhook-send' } as const;

export interface DueJob {
  kind: MessageKind;
  id: number;
  /** The `send_at` (ISO) the message had when this job was made. */
  sendAt: string;
  /** Made by a resume of its sender (sending/brakes.ts): the brakes let it go. */
  released?: boolean;
}
export interface DeliverJob<K extends MessageKind = MessageKind> {
  kind: K;
  id: number;
}

export interface JobQueue {
  readonly boss: PgBoss;
  /** Enqueues the due job of a scheduled message, inside the caller's transaction. */
  scheduleDue(trx: Db, job: DueJob): Promise<void>;
  /**
   * Asks for delivery work on a message, now or at `startAfter`. Requests for the same message and
   * the same `startAfter` are one job (parallel jobs that run dry all ask for the same follow-up).
   * `coalesce` folds requests made within a few seconds into one job (sweeps).
   */
  requestDelivery(job: DeliverJob, options?: { startAfter?: Date; coalesce?: boolean }): Promise<void>;
  /** Asks for an endpoint's due webhook deliveries to be sent; a request while one is queued is a no-op. */
  requestWebhookSend(endpointId: number): Promise<void>;
  stop(): Promise<void>;
}

/** The schema pg-boss keeps its tables in. */
function jobQueueSchema(config: Config): string {
  return `${config.databaseSchema === 'public' ? '' : `${config.databaseSchema}_`}pgboss`;
}

export async function openJobQueue(database: DatabaseHandle, config: Config): Promise<JobQueue> {
  const schema = jobQueueSchema(config);
  // A job whose worker died (its heartbeat stopped) is failed, and so retried or, for a webhook
  // endpoint's job (policy stately), replaced, at pg-boss's next supervising pass over its queue,
  // every JOB_SUPERVISE_INTERVAL (a minute by default: a pass costs about 80 ms of CPU on PGlite).
  const seconds = Math.max(1, Math.round(config.jobSuperviseIntervalMs / 1000));
  const supervise = { superviseIntervalSeconds: seconds, monitorIntervalSeconds: seconds };
  const boss = database.pglite
    ? new PgBoss({ db: fromPglite(database.pglite as never), backend: 'pglite', schema, ...supervise })
    : new PgBoss({ connectionString: config.databaseUrl, schema, max: 4, ...supervise });
  boss.on('error', (error) => console.error('job queue error', error));
  await boss.start();
  // Delivery work heartbeats while it runs: a worker that dies stops heartbeating and its job is
  // retried elsewhere (the deliveries it held are reclaimed by their own leases, see deliveries.ts).
  await ensureQueue(boss, QUEUES.due, { retryLimit: 5, retryDelay: 5, retryBackoff: true, expireInSeconds: 600 });
  await ensureQueue(boss, QUEUES.deliver, {
    retryLimit: 10,
    retryDelay: 2,
    retryBackoff: true,
    heartbeatSeconds: 10,
    expireInSeconds: 3600,
  });
  // A webhook job that dies is not retried: its endpoint's work is found again by the next poll.
  await ensureQueue(boss, QUEUES.webhook, { policy: 'stately', retryLimit: 0, heartbeatSeconds: 10, expireInSeconds: 900 });
  // pg-boss looks a queue up on its own connection the first time it sends to it. Inside a
  // transaction on PGlite (one connection) that look-up would wait for the transaction itself, so
  // each queue is looked up once now, before any transaction needs it.
  for (const name of Object.values(QUEUES)) await boss.getJobById(name, randomUUID());

  return {
    boss,
    async scheduleDue(trx, job) {
      await boss.send(QUEUES.due, job, { startAfter: new Date(job.sendAt), db: fromKysely(trx) });
    },
    async requestDelivery(job, options = {}) {
      const { startAfter, coalesce } = options;
      // A singleton slot counts finished jobs too: a follow-up keyed by the message alone (or by a
      // coarse time) would be dropped whenever another had been asked for within the slot, and the
      // message would stall until the next sweep. Keyed by the exact time, only true repeats fold.
      const key = startAfter ? `${job.kind}:${job.id}@${startAfter.getTime()}` : `${job.kind}:${job.id}`;
      await boss.send(QUEUES.deliver, job, {
        ...(startAfter ? { startAfter, singletonKey: key, singletonSeconds: 3600 } : {}),
        ...(coalesce ? { singletonKey: key, singletonSeconds: 5 } : {}),
      });
    },
    async requestWebhookSend(endpointId) {
      await boss.send(QUEUES.webhook, { endpointId }, { singletonKey: String(endpointId) });
    },
    async stop() {
      await boss.stop({ graceful: true, timeout: 20_000 });
    },
  };
}

async function ensureQueue(boss: PgBoss, name: string, options: Parameters<PgBoss['createQueue']>[1]): Promise<void> {
  // A queue's policy is fixed when it is made.
  const { policy: _policy, ...changeable } = options ?? {};
  if (await boss.getQueue(name)) await boss.updateQueue(name, changeable as never);
  else await boss.createQueue(name, options);
}

/**
 * Jobs due and waiting for a worker, by queue, and how long the oldest has waited: read from
 * pg-boss's table, by the database's clock (pg-boss's own).
 */
export async function dueJobs(db: Db, config: Config): Promise<{ name: string; n: number; ageSeconds: number }[]> {
  const { rows } = await sql<{ name: string; n: string; age: string }>`
    SELECT name, count(*) AS n, extract(epoch FROM now() - min(start_after)) AS age
    FROM ${sql.table(`${jobQueueSchema(config)}.job`)}
    WHERE state IN ('created', 'retry') AND start_after <= now()
    GROUP BY name`.execute(db);
  return rows.map((row) => ({ name: row.name, n: Number(row.n), ageSeconds: Math.max(0, Number(row.age)) }));
}
