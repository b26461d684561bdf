import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import { failureLevel } from '../db/errors.ts';
import { type JobQueue, QUEUES } from '../db/job-queue.ts';
import type { WebhookEndpointRow } from '../db/schema.ts';
import type { Clock } from '../time.ts';
import {
  type AttemptOutcome,
  type ClaimedWebhook,
  claimWebhookDeliveries,
  endpointsWithDueWork,
  ensurePayloads,
  noteEndpointHealth,
  pruneWebhookHistory,
  recordWebhookAttempts,
  releaseWebhookClaims,
  webhookId,
} from './deliveries.ts';
import { createWebhookSender } from './sender.ts';
import { signatureHeader } from './signing.ts';

/**
 * The webhook side of the worker role.
 *
 * Finding work: a statement that queues deliveries NOTIFYs `hopper_webhooks` at its commit
 * (migration 0017); the worker then asks for a `webhook-send` job for each endpoint with due work,
 * and wakes its own queue worker rather than waiting for the queue's next poll. A poll every
 * WEBHOOK_POLL_INTERVAL does the same for retries falling due and claims a dead worker left behind.
 * The queue keeps one job per endpoint queued and one running (policy `stately`), so an endpoint's
 * requests come from one worker at a time.
 *
 * Sending (`pump`, the job's work) is a pipeline, not rounds: WEBHOOK_MAX_IN_FLIGHT lanes post
 * continuously over keep-alive connections, taking deliveries from a buffer that is topped up a
 * claim (one statement, up to 100 rows, `FOR UPDATE SKIP LOCKED`) while 100 are still waiting, and
 * every outcome is recorded in batches (one statement per 200 outcomes or 20 ms). The job ends when
 * nothing has been due for a moment (250 ms) and nothing is in flight, after a minute (fairness between endpoints), or when the
 * endpoint looks down — WEBHOOK_MAX_IN_FLIGHT failures in a row: claims not yet sent are handed
 * back, and the retries' schedule takes over rather than hammering an endpoint that is down.
 *
 * Old history goes by a sweep every hour (WEBHOOK_RETENTION).
 */
export interface WebhookWorkerDeps {
  database: DatabaseHandle;
  config: Config;
  queue: JobQueue;
  clock: Clock;
  log: FastifyBaseLogger;
  /** Told of every attempt's outcome (metrics). */
  onAttempt?: (outcome: 'delivered' | 'retry' | 'failed') => void;
}

export interface WebhookWorker {
  /** Sends an endpoint's due deliveries now (the job's work); resolves when none is due. */
  pump(endpointId: number): Promise<void>;
  /** Deletes the history older than WEBHOOK_RETENTION now (the hourly sweep's work). */
  prune(): Promise<number>;
  stop(): Promise<void>;
}

/** A job runs for about this long at most before leaving the rest to the next one (fairness between endpoints). */
const MAX_JOB_MS = 60_000;
const MAX_RETRY_DELAY_MS = 12 * 3_600_000;
/**
 * Deliveries claimed per statement. The buffer is topped up when it holds no more than a claim's
 * worth, so the next claim (three statements: the endpoint, the claim, the bodies) runs while the
 * lanes still have work, and the lanes never wait on the database.
 */
const CLAIM_BATCH = 100;
/** Outcomes recorded per statement, or after this long, whichever comes first. */
const RECORD_BATCH = 200;
const RECORD_AFTER_MS = 20;
/** While requests are still in flight or lingering and nothing was due, look again this often. */
const DRY_RETRY_MS = 25;
/**
 * A job that ran dry looks again for this long before it ends: events that keep coming (a commit
 * every few tens of milliseconds) are sent at once rather than each waiting for a new job.
 */
const LINGER_MS = 250;
const PRUNE_EVERY_MS = 3_600_000;
const AFTER_JOB_MS = 50;
/** Wake-ups by NOTIFY closer together than this are folded into one look for work. */
const WAKE_SPACING_MS = 10;

/** Exponential backoff with jitter: base × 2^(n−1), capped at 12 h, scaled by a random 50–100 %. */
export function retryDelay(baseMs: number, attempt: number): number {
  const exponential = Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(exponential * (0.5 + Math.random() * 0.5));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function startWebhookWorker(deps: WebhookWorkerDeps): Promise<WebhookWorker> {
  const { db } = deps.database;
  const settings = deps.config.webhooks;
  const sender = createWebhookSender(settings);
  // A claim waits in the buffer behind at most two claims' worth, each lane's post within the
  // timeout; then its own post, then its record.
  const leaseMs = settings.timeoutMs * (Math.ceil((2 * CLAIM_BATCH) / settings.maxInFlight) + 2);
  let stopping = false;

  async function pump(endpointId: number): Promise<void> {
    const until = Date.now() + MAX_JOB_MS;
    const buffer: ClaimedWebhook[] = [];
    let endpoint: WebhookEndpointRow | undefined;
    let secrets: string[] = [];
    let dryAt = 0;
    let lastClaimAt = Date.now();
    let halted = false;
    let failuresInARow = 0;
    let inFlight = 0;
    let refilling: Promise<void> | undefined;
    let problem: unknown;

    const refill = async () => {
      endpoint = await db.selectFrom('webhook_endpoints').selectAll().where('id', '=', endpointId).executeTakeFirst();
      if (!endpoint?.enabled) {
        halted = true;
        return;
      }
      const now = deps.clock();
      secrets = [endpoint.secret];
      if (endpoint.previous_secret && endpoint.previous_secret_expires_at && endpoint.previous_secret_expires_at > now) {
        secrets.push(endpoint.previous_secret);
      }
      const claimed = await claimWebhookDeliveries(db, endpointId, CLAIM_BATCH, now, leaseMs);
      if (claimed.length === 0) {
        dryAt = Date.now();
        return;
      }
      dryAt = 0;
      lastClaimAt = Date.now();
      await ensurePayloads(db, claimed, deps.config.publicUrl);
      buffer.push(...claimed);
    };
    const stopTaking = () => stopping || halted || problem !== undefined || Date.now() >= until;

    // Outcomes, recorded in order of arrival by one statement per batch, one batch at a time.
    const outcomes: AttemptOutcome[] = [];
    let recording: Promise<void> = Promise.resolve();
    let flushTimer: NodeJS.Timeout | undefined;
    const flush = () => {
      clearTimeout(flushTimer);
      flushTimer = undefined;
      const batch = outcomes.splice(0);
      if (batch.length === 0) return recording;
      recording = recording.then(async () => {
        const finished = deps.clock();
        await recordWebhookAttempts(db, batch, finished);
        const succeeded = batch.some((o) => o.ok);
        if (!succeeded || endpoint?.failing_since) {
          const lastError = batch.findLast((o) => !o.ok)?.error ?? null;
          await noteEndpointHealth(db, endpointId, { succeeded, lastError }, finished, settings.retryForMs);
        }
      });
      recording = recording.catch((error) => {
        problem ??= error;
      });
      return recording;
    };
    const record = (outcome: AttemptOutcome) => {
      outcomes.push(outcome);
      if (outcomes.length >= RECORD_BATCH) void flush();
      else flushTimer ??= setTimeout(flush, RECORD_AFTER_MS);
    };

    const next = async (): Promise<ClaimedWebhook | undefined> => {
      for (;;) {
        if (stopTaking()) return undefined;
        const mayClaim = dryAt === 0 || Date.now() - dryAt >= DRY_RETRY_MS;
        if (buffer.length <= CLAIM_BATCH && !refilling && mayClaim) {
          refilling = refill()
            .catch((error) => {
              problem ??= error;
            })
            .finally(() => {
              refilling = undefined;
            });
        }
        const claim = buffer.shift();
        if (claim) return claim;
        if (refilling) await refilling;
        else if (inFlight === 0 && Date.now() - lastClaimAt >= LINGER_MS) return undefined;
        else await sleep(DRY_RETRY_MS);
      }
    };

    const lane = async () => {
      for (let claim = await next(); claim; claim = await next()) {
        inFlight++;
        const startedAt = deps.clock();
        const id = webhookId(claim.uid);
        const timestamp = Math.floor(startedAt.getTime() / 1000);
        const body = claim.payload ?? '';
        const result = await sender.post(
          endpoint?.url ?? '',
          { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatureHeader(secrets, id, timestamp, body) },
          body,
        );
        inFlight--;
        const finished = deps.clock();
        const expired = finished.getTime() - claim.created_at.getTime() >= settings.retryForMs;
        const nextAt = result.ok || expired ? null : new Date(finished.getTime() + retryDelay(settings.retryBaseMs, claim.attempts));
        deps.onAttempt?.(result.ok ? 'delivered' : nextAt ? 'retry' : 'failed');
        record({ id: claim.id, attempts: claim.attempts, startedAt, ...result, nextAt });
        if (result.ok) failuresInARow = 0;
        else if (++failuresInARow >= settings.maxInFlight && !halted) {
          halted = true;
          deps.log.warn({ endpoint: endpointId, error: result.error }, 'webhook endpoint failing');
        }
      }
    };

    await Promise.all(Array.from({ length: settings.maxInFlight }, lane));
    await refilling;
    await flush();
    // Claims not sent (the endpoint looks down, the job's time is up, the worker stops) go back.
    await releaseWebhookClaims(db, buffer.splice(0), deps.clock()).catch((error) => {
      problem ??= error;
    });
    if (problem !== undefined) throw problem;
  }

  let workerId: string | undefined;
  const wakeQueue = () => {
    if (workerId && !stopping) deps.queue.boss.notifyWorker(workerId);
  };
  workerId = await deps.queue.boss.work<{ endpointId: number }>(
    QUEUES.webhook,
    { pollingIntervalSeconds: 0.5, batchSize: 1, localConcurrency: 4 },
    async ([job]) => {
      if (!job) return;
      try {
        await pump(job.data.endpointId);
      } catch (error) {
        deps.log[failureLevel(error)]({ err: error, endpoint: job.data.endpointId }, 'webhook job failed');
        throw error;
      } finally {
        // A job asked for while this one ran waits for it to be marked done: fetch again once it
        // is, rather than at the queue's next poll (half a second).
        setTimeout(wakeQueue, AFTER_JOB_MS).unref();
      }
    },
  );

  // Looking for work: on NOTIFY, on the poll; never two at once, and a wake-up during one runs another after it.
  let polling: Promise<void> | undefined;
  let again = false;
  const poll = async () => {
    try {
      const due = await endpointsWithDueWork(db, deps.clock());
      for (const id of due) {
        if (stopping) return;
        await deps.queue.requestWebhookSend(id);
      }
      if (due.length > 0) wakeQueue();
    } catch (error) {
      // An outage is expected and waited out (docs/operations.md): a warning, as elsewhere.
      if (!stopping) deps.log[failureLevel(error)]({ err: error }, 'webhook poll failed');
    }
  };
  const wake = () => {
    if (stopping) return;
    if (polling) {
      again = true;
      return;
    }
    polling = poll()
      .then(async () => {
        await sleep(WAKE_SPACING_MS);
      })
      .finally(() => {
        polling = undefined;
        if (again) {
          again = false;
          wake();
        }
      });
  };
  // The listener lives as long as the database handle (closed with it).
  await deps.database.listen('hopper_webhooks', wake);
  const timer = setInterval(wake, settings.pollMs);

  const prune = async () => pruneWebhookHistory(db, new Date(deps.clock().getTime() - settings.retentionMs));
  let pruning: Promise<unknown> | undefined;
  const pruneTimer = setInterval(
    () => {
      pruning ??= prune()
        .then((n) => n > 0 && deps.log.info({ events: n }, 'old webhook history deleted'))
        .catch((error) => deps.log[failureLevel(error)]({ err: error }, 'webhook history sweep failed'))
        .finally(() => {
          pruning = undefined;
        });
    },
    Math.min(PRUNE_EVERY_MS, settings.retentionMs),
  );

  return {
    pump,
    prune,
    async stop() {
      stopping = true;
      clearInterval(timer);
      clearInterval(pruneTimer);
      await polling;
      await pruning;
      await deps.queue.boss.offWork(QUEUES.webhook, { wait: true });
      await sender.close();
    },
  };
}
