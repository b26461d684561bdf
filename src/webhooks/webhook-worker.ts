import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { DatabaseHandle, Db } from '../db/database.ts';
import { failureLevel } from '../db/errors.ts';
import { GroupCommit } from '../db/group-commit.ts';
import { type JobQueue, QUEUES } from '../db/job-queue.ts';
import type { WebhookEndpointRow } from '../db/schema.ts';
import type { MailTransport } from '../email/transport.ts';
import { findUser } from '../identity/users.ts';
import { backoffMs, type Clock, realTimeMs } from '../time.ts';
import {
  type AttemptOutcome,
  type ClaimedWebhook,
  claimWebhookDeliveries,
  ensurePayloads,
  insertEndpointDisabledEvent,
  pruneWebhookHistory,
  recordWebhookAttempts,
  releaseWebhookClaims,
  webhookId,
} from './deliveries.ts';
import {
  disableEndpoint,
  endpointsWithDueWork,
  findEndpointById,
  noteEndpointHealth,
  pauseEndpoint,
  toApiWebhookEndpoint,
} from './endpoints.ts';
import { createWebhookSender, type WebhookSender } from './sender.ts';
import { signatureHeader } from './signing.ts';

/**
 * The webhook side of the worker role.
 *
 * Finding work: a statement that queues deliveries NOTIFYs the installation's `hopper_webhooks`
 * channel at its commit (migrations 0017 and 0037); the worker then asks for a `webhook-send` job
 * for each endpoint with due work, and wakes its own queue worker rather than waiting for the
 * queue's next poll. A poll every WEBHOOK_POLL_INTERVAL does the same for retries falling due and
 * claims a dead worker left behind.
 * The queue keeps one job per endpoint queued and one running (policy `stately`), so an endpoint's
 * requests come from one worker at a time.
 *
 * Sending (an EndpointRun, the job's work) is a pipeline, not rounds: WEBHOOK_MAX_IN_FLIGHT lanes
 * post continuously over keep-alive connections, taking deliveries from a buffer that is topped up
 * a claim (one statement, up to 100 rows, `FOR UPDATE SKIP LOCKED`) while 100 are still waiting,
 * and every outcome is recorded by group commit (one statement per 200 outcomes or 20 ms). The job
 * ends when nothing has been due for a moment (250 ms) and nothing is in flight, after a minute
 * (fairness between endpoints), or when the endpoint looks down — WEBHOOK_MAX_IN_FLIGHT failures
 * in a row: claims not yet sent are handed back, and the retries' schedule takes over rather than
 * hammering an endpoint that is down.
 *
 * Old history goes by a sweep every hour (WEBHOOK_RETENTION).
 */
interface WebhookWorkerDeps {
  database: DatabaseHandle;
  config: Config;
  queue: JobQueue;
  clock: Clock;
  log: FastifyBaseLogger;
  /** Where the email telling an owner their endpoint was disabled goes (the worker's mail transport); none: no email. */
  mail?: MailTransport | undefined;
  /** Told of every attempt's outcome (metrics). */
  onAttempt?: (outcome: 'delivered' | 'retry' | 'failed') => void;
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How the worker looks for due work: not now, once, or once more after the look under way (a wake-up came during it). */
type Looking = 'idle' | 'looking' | 'looking again';

/** What an endpoint's run takes from its worker. */
interface RunContext {
  deps: WebhookWorkerDeps;
  db: Db;
  sender: WebhookSender;
  /**
   * A claim's lease: it waits in the buffer behind at most two claims' worth, each lane's post
   * within the timeout; then its own post, then its record.
   */
  leaseMs: number;
  stopping(): boolean;
  /** An endpoint was disabled (410 Gone, or failing too long): tell the owner's other endpoints, and the owner. */
  disabled(endpoint: WebhookEndpointRow): Promise<void>;
}

export class WebhookWorker {
  readonly #deps: WebhookWorkerDeps;
  readonly #sender: WebhookSender;
  readonly #run: RunContext;
  #stopping = false;
  #workerId: string | undefined;
  #looking: Looking = 'idle';
  #lookedFor: Promise<void> | undefined;
  #pruning: Promise<unknown> | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  #pruneTimer: NodeJS.Timeout | undefined;

  constructor(deps: WebhookWorkerDeps) {
    this.#deps = deps;
    const settings = deps.config.webhooks;
    this.#sender = createWebhookSender(settings);
    this.#run = {
      deps,
      db: deps.database.db,
      sender: this.#sender,
      leaseMs: settings.timeoutMs * (Math.ceil((2 * CLAIM_BATCH) / settings.maxInFlight) + 2),
      stopping: () => this.#stopping,
      disabled: (endpoint) => this.#disabled(endpoint),
    };
  }

  /**
   * An endpoint was disabled: an `endpoint.disabled` event to its user's other enabled endpoints,
   * and an email to the user (the Standard Webhooks guidance: tell the owner by another channel).
   * A failure to mail is logged; the endpoint stays disabled either way.
   */
  async #disabled(endpoint: WebhookEndpointRow): Promise<void> {
    const { clock, config, log, mail } = this.#deps;
    const db = this.#run.db;
    const now = clock();
    const queued = await insertEndpointDisabledEvent(db, endpoint, toApiWebhookEndpoint(endpoint), now);
    log.warn({ endpoint: endpoint.id, reason: endpoint.disabled_reason, notified: queued }, 'webhook endpoint disabled');
    const owner = mail ? await findUser(db, endpoint.user_id) : undefined;
    if (!mail || !owner?.email) return;
    const settings = `${config.publicUrl}/v3/webhooks/${endpoint.id}`;
    const text = [
      `Hopper disabled your webhook endpoint ${endpoint.url}${endpoint.description ? ` (${endpoint.description})` : ''}.`,
      '',
      `Why: ${endpoint.disabled_reason ?? 'it kept failing'}`,
      '',
      'Events for it are kept while it is disabled. Once your receiver is back, enable it again',
      `(PUT ${settings} with {"enabled": true}): what was pending is sent at once. To ask for`,
      `everything since a time, POST ${settings}/resend with {"since": "<ISO 8601 time>"}.`,
    ].join('\n');
    await mail
      .forward(
        {
          from: config.mailFrom,
          to: owner.email,
          subject: `Webhook endpoint disabled: ${endpoint.url}`,
          text,
          messageId: `<${randomUUID()}@${new URL(config.publicUrl).hostname}>`,
        },
        `webhook-disabled-${endpoint.id}-${now.getTime()}`,
      )
      .catch((error: unknown) => log.warn({ err: error, endpoint: endpoint.id }, 'the email about a disabled webhook endpoint failed'));
  }

  async start(): Promise<void> {
    const { boss } = this.#deps.queue;
    this.#workerId = await boss.work<{ endpointId: number }>(
      QUEUES.webhook,
      { pollingIntervalSeconds: 0.5, batchSize: 1, localConcurrency: 4 },
      async ([job]) => {
        if (!job) return;
        try {
          await this.pump(job.data.endpointId);
        } catch (error) {
          this.#deps.log[failureLevel(error)]({ err: error, endpoint: job.data.endpointId }, 'webhook job failed');
          throw error;
        } finally {
          // A job asked for while this one ran waits for it to be marked done: fetch again once it
          // is, rather than at the queue's next poll (half a second).
          setTimeout(() => this.#wakeQueue(), AFTER_JOB_MS).unref();
        }
      },
    );
    // The listener lives as long as the database handle (closed with it).
    await this.#deps.database.listen('hopper_webhooks', () => this.#wake());
    this.#pollTimer = setInterval(() => this.#wake(), this.#deps.config.webhooks.pollMs);
    const retentionMs = this.#deps.config.webhooks.retentionMs;
    this.#pruneTimer = setInterval(() => this.#sweep(), Math.min(PRUNE_EVERY_MS, retentionMs));
  }

  /** Sends an endpoint's due deliveries now (the job's work); resolves when none is due. */
  pump(endpointId: number): Promise<void> {
    return new EndpointRun(this.#run, endpointId).run();
  }

  /** Deletes the history older than WEBHOOK_RETENTION now (the hourly sweep's work). */
  prune(): Promise<number> {
    return pruneWebhookHistory(this.#run.db, new Date(this.#deps.clock().getTime() - this.#deps.config.webhooks.retentionMs));
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    clearInterval(this.#pollTimer);
    clearInterval(this.#pruneTimer);
    await this.#lookedFor;
    await this.#pruning;
    await this.#deps.queue.boss.offWork(QUEUES.webhook, { wait: true });
    await this.#sender.close();
  }

  #wakeQueue(): void {
    if (this.#workerId && !this.#stopping) this.#deps.queue.boss.notifyWorker(this.#workerId);
  }

  /** Looks for due work (on NOTIFY, on the poll): never two looks at once, and a wake-up during one runs another after it. */
  #wake(): void {
    if (this.#stopping) return;
    if (this.#looking !== 'idle') {
      this.#looking = 'looking again';
      return;
    }
    this.#looking = 'looking';
    this.#lookedFor = this.#lookForWork()
      .then(async () => {
        await sleep(WAKE_SPACING_MS);
      })
      .finally(() => {
        const again = this.#looking === 'looking again';
        this.#looking = 'idle';
        this.#lookedFor = undefined;
        if (again) this.#wake();
      });
  }

  async #lookForWork(): Promise<void> {
    try {
      const due = await endpointsWithDueWork(this.#run.db, this.#deps.clock());
      for (const id of due) {
        if (this.#stopping) return;
        await this.#deps.queue.requestWebhookSend(id);
      }
      if (due.length > 0) this.#wakeQueue();
    } catch (error) {
      // An outage is expected and waited out (docs/operations.md): a warning, as elsewhere.
      if (!this.#stopping) this.#deps.log[failureLevel(error)]({ err: error }, 'webhook poll failed');
    }
  }

  #sweep(): void {
    this.#pruning ??= this.prune()
      .then((n) => n > 0 && this.#deps.log.info({ events: n }, 'old webhook history deleted'))
      .catch((error) => this.#deps.log[failureLevel(error)]({ err: error }, 'webhook history sweep failed'))
      .finally(() => {
        this.#pruning = undefined;
      });
  }
}

/** Why a run stops taking claims before its time is up: the endpoint is disabled or looks down, or a statement failed. */
type Halt = { why: 'endpoint disabled' } | { why: 'endpoint down' } | { why: 'failed'; error: unknown };

/** One `webhook-send` job: an endpoint's due deliveries, sent until none is due, the job's time is up, or the endpoint looks down. */
class EndpointRun {
  readonly #worker: RunContext;
  readonly #endpointId: number;
  readonly #until = realTimeMs() + MAX_JOB_MS;
  /** Claimed deliveries waiting for a lane. */
  readonly #claims: ClaimedWebhook[] = [];
  /** Attempts' outcomes, recorded by group commit in order of arrival, one batch at a time. */
  readonly #outcomes: GroupCommit<AttemptOutcome>;
  #endpoint: WebhookEndpointRow | undefined;
  /** The secrets that sign: the current one, and the previous one while a rotation overlaps. */
  #secrets: string[] = [];
  #halt: Halt | undefined;
  #failuresInARow = 0;
  /** The latest Retry-After this run was answered with: the endpoint is paused until then. */
  #pausedUntil: Date | undefined;
  #inFlight = 0;
  #refilling: Promise<void> | undefined;
  /** When the last claim found nothing due (0: it found some). */
  #dryAt = 0;
  #lastClaimAt = realTimeMs();

  constructor(worker: RunContext, endpointId: number) {
    this.#worker = worker;
    this.#endpointId = endpointId;
    this.#outcomes = new GroupCommit<AttemptOutcome>({
      maxBatch: RECORD_BATCH,
      delay: RECORD_AFTER_MS,
      write: async (batch) => {
        await this.#record(batch);
        return undefined;
      },
    });
  }

  async run(): Promise<void> {
    const { maxInFlight } = this.#worker.deps.config.webhooks;
    await Promise.all(Array.from({ length: maxInFlight }, () => this.#lane()));
    await this.#refilling;
    await this.#outcomes.drain().catch((error: unknown) => this.#fail(error));
    // Claims not sent (the endpoint looks down, the job's time is up, the worker stops) go back.
    await releaseWebhookClaims(this.#worker.db, this.#claims.splice(0), this.#worker.deps.clock()).catch((error: unknown) =>
      this.#fail(error),
    );
    if (this.#halt?.why === 'failed') throw this.#halt.error;
  }

  #fail(error: unknown): void {
    if (this.#halt?.why !== 'failed') this.#halt = { why: 'failed', error };
  }

  #stopsTaking(): boolean {
    return this.#worker.stopping() || this.#halt !== undefined || this.#outcomes.failure !== undefined || realTimeMs() >= this.#until;
  }

  async #lane(): Promise<void> {
    for (let claim = await this.#next(); claim; claim = await this.#next()) await this.#send(claim);
  }

  /** The next claim to send: from the buffer, topped up as it runs low; undefined when the run ends. */
  async #next(): Promise<ClaimedWebhook | undefined> {
    for (;;) {
      if (this.#stopsTaking()) return undefined;
      const mayClaim = this.#dryAt === 0 || realTimeMs() - this.#dryAt >= DRY_RETRY_MS;
      if (this.#claims.length <= CLAIM_BATCH && !this.#refilling && mayClaim) {
        this.#refilling = this.#refill()
          .catch((error: unknown) => this.#fail(error))
          .finally(() => {
            this.#refilling = undefined;
          });
      }
      const claim = this.#claims.shift();
      if (claim) return claim;
      if (this.#refilling) await this.#refilling;
      else if (this.#inFlight === 0 && realTimeMs() - this.#lastClaimAt >= LINGER_MS) return undefined;
      else await sleep(DRY_RETRY_MS);
    }
  }

  async #refill(): Promise<void> {
    const { db, leaseMs } = this.#worker;
    const { clock, config } = this.#worker.deps;
    this.#endpoint = await findEndpointById(db, this.#endpointId);
    if (!this.#endpoint?.enabled) {
      this.#halt ??= { why: 'endpoint disabled' };
      return;
    }
    const now = clock();
    const endpoint = this.#endpoint;
    // Paused by a Retry-After (this run's or another's): nothing is sent before then.
    if (endpoint.paused_until && endpoint.paused_until > now) {
      this.#halt ??= { why: 'endpoint down' };
      return;
    }
    this.#secrets = [endpoint.secret];
    if (endpoint.previous_secret && endpoint.previous_secret_expires_at && endpoint.previous_secret_expires_at > now) {
      this.#secrets.push(endpoint.previous_secret);
    }
    const claimed = await claimWebhookDeliveries(db, this.#endpointId, CLAIM_BATCH, now, leaseMs);
    if (claimed.length === 0) {
      this.#dryAt = realTimeMs();
      return;
    }
    this.#dryAt = 0;
    this.#lastClaimAt = realTimeMs();
    await ensurePayloads(db, claimed, config.publicUrl);
    this.#claims.push(...claimed);
  }

  async #send(claim: ClaimedWebhook): Promise<void> {
    const { clock, config, log, onAttempt } = this.#worker.deps;
    const settings = config.webhooks;
    this.#inFlight++;
    const startedAt = clock();
    const id = webhookId(claim.uid);
    const timestamp = Math.floor(startedAt.getTime() / 1000);
    const body = claim.payload ?? '';
    const result = await this.#worker.sender.post(
      this.#endpoint?.url ?? '',
      {
        'webhook-id': id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signatureHeader(this.#secrets, id, timestamp, body),
      },
      body,
    );
    this.#inFlight--;
    const finished = clock();
    const expired = finished.getTime() - claim.created_at.getTime() >= settings.retryForMs;
    // Retry-After (429, 503) is honoured, up to the longest backoff: the endpoint is paused until then.
    const retryAt =
      result.retryAfterMs === null ? undefined : new Date(finished.getTime() + Math.min(result.retryAfterMs, MAX_RETRY_DELAY_MS));
    if (retryAt && (!this.#pausedUntil || retryAt > this.#pausedUntil)) this.#pausedUntil = retryAt;
    const nextAt =
      result.ok || expired
        ? null
        : (retryAt ??
          new Date(
            finished.getTime() + backoffMs(claim.attempts, { baseMs: settings.retryBaseMs, maxMs: MAX_RETRY_DELAY_MS, jitter: true }),
          ));
    onAttempt?.(result.ok ? 'delivered' : nextAt ? 'retry' : 'failed');
    // A failure to record is the run's failure (drain() throws it); the claim's lease runs out and it is retried.
    this.#outcomes.add({ id: claim.id, attempts: claim.attempts, startedAt, ...result, nextAt }).catch(() => {});
    if (result.status === 410) this.#halt ??= { why: 'endpoint disabled' };
    else if (retryAt) this.#halt ??= { why: 'endpoint down' };
    if (result.ok) this.#failuresInARow = 0;
    else if (++this.#failuresInARow >= settings.maxInFlight && this.#halt === undefined) {
      this.#halt = { why: 'endpoint down' };
      log.warn({ endpoint: this.#endpointId, error: result.error }, 'webhook endpoint failing');
    }
  }

  /** A batch of outcomes in one statement, and the endpoint's failing streak kept. */
  async #record(batch: AttemptOutcome[]): Promise<void> {
    const { clock, config } = this.#worker.deps;
    const finished = clock();
    const { db } = this.#worker;
    await recordWebhookAttempts(db, batch, finished);
    if (this.#pausedUntil) await pauseEndpoint(db, this.#endpointId, this.#pausedUntil);
    const gone = batch.find((o) => o.status === 410);
    const succeeded = batch.some((o) => o.ok);
    let disabled: WebhookEndpointRow | undefined;
    if (gone) {
      // 410 Gone: the receiver says the endpoint is no more. Disabled at once, not retried for days.
      const reason = `Disabled at once: the endpoint answered 410 Gone at ${gone.startedAt.toISOString()}`;
      disabled = await disableEndpoint(db, this.#endpointId, reason, finished);
    } else if (!succeeded || this.#endpoint?.failing_since) {
      const lastError = batch.findLast((o) => !o.ok)?.error ?? null;
      disabled = await noteEndpointHealth(db, this.#endpointId, { succeeded, lastError }, finished, config.webhooks.retryForMs);
    }
    if (disabled) await this.#worker.disabled(disabled);
  }
}

/** Starts the webhook worker of this process (see WebhookWorker). */
export async function startWebhookWorker(deps: WebhookWorkerDeps): Promise<WebhookWorker> {
  const worker = new WebhookWorker(deps);
  await worker.start();
  return worker;
}
