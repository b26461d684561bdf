import type { FastifyBaseLogger } from 'fastify';
import type { JobResult } from 'pg-boss';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { JobQueue } from '../db/job-queue.ts';
import { findDelivery, handedOverVoicemails } from '../sending/deliveries.ts';
import { isPending } from '../sending/delivery-states.ts';
import { type Clock, inRealTime } from '../time.ts';
import { recordOutcomes } from './dispositions.ts';
import { type CancelledJob, type DeliveryJob, ensureProviderQueue, PROVIDER_QUEUES, sendProviderJob } from './provider-queues.ts';
import { readCallStatus, SLYBROADCAST_SOURCE, slybroadcastControl } from './providers/slybroadcast.ts';
import { applyEarlyResult } from './results.ts';
import { findSubmission, noteChecked } from './submissions.ts';

/** Status checks per Slybroadcast delivery before it is left `sent`. */
const SLYBROADCAST_MAX_CHECKS = 6;
/**
 * Status checks are taken 8 a fetch, and fetched again at once while a fetch comes back full. A
 * batch is asked one by one: 8 gateways timing out (30 s each) still end inside the queue's 300 s.
 */
const CHECK_WORK = { pollingIntervalSeconds: 0.5, batchSize: 8, burstWhenBatchFull: true, perJobResults: true } as const;

interface Deps {
  db: Db;
  config: Config;
  queue: JobQueue;
  clock: Clock;
  log: FastifyBaseLogger;
}

/** Works the providers' jobs (provider-queues.ts) in worker processes; returns how to stop. */
export async function startProviderJobHandlers(deps: Deps): Promise<() => Promise<void>> {
  const { db, config, clock, log } = deps;
  const { boss } = deps.queue;
  for (const name of Object.values(PROVIDER_QUEUES)) await ensureProviderQueue(boss, name);

  await boss.work<DeliveryJob>(PROVIDER_QUEUES.result, { pollingIntervalSeconds: 0.5, batchSize: 1 }, async ([job]) => {
    if (!job) return;
    const { deliveryId } = job.data;
    if (await applyEarlyResult({ db, boss }, deliveryId, clock())) return;
    // Still being handed over, or waiting for a retry: come back when that is due.
    const delivery = await findDelivery(db, deliveryId);
    const wait = Math.max(0, (delivery?.next_attempt_at.getTime() ?? 0) - clock().getTime());
    await sendProviderJob(boss, PROVIDER_QUEUES.result, { deliveryId }, inRealTime(wait + 1000));
  });

  // A drop to N numbers asks N times per SLYBROADCAST_RESULT_TIMEOUT: taken 8 at a time (CHECK_WORK),
  // not one per half-second poll (2 a second: 14,400 in the default 2 h, fewer than a big drop has).
  const check = slybroadcastCheck(deps);
  await boss.work<DeliveryJob, JobResult[], typeof CHECK_WORK>(PROVIDER_QUEUES.check, CHECK_WORK, async (jobs) => {
    const results: JobResult[] = [];
    for (const job of jobs) {
      try {
        await check(job.data.deliveryId);
        results.push({ id: job.id, status: 'completed' });
      } catch (error) {
        // This job alone is retried (the queue's retryDelay), not the batch.
        results.push({ id: job.id, status: 'failed', output: { message: (error as Error).message } });
      }
    }
    return results;
  });

  await boss.work<CancelledJob>(PROVIDER_QUEUES.cancelled, { pollingIntervalSeconds: 0.5, batchSize: 1 }, async ([job]) => {
    if (job?.data.kind !== 'voicemail_drop' || !config.slybroadcast) return;
    const sessions = await handedOverVoicemails(db, job.data.id, 'Slybroadcast');
    for (const session of sessions.map((s) => ({ sessionId: s.providerMessageId, deliveryId: s.deliveryId }))) {
      try {
        const reply = await slybroadcastControl(config.slybroadcast, 'stop', { session_id: session.sessionId });
        if (/^\s*ERROR\b/i.test(reply))
          log.warn(
            { dropId: job.data.id, sessionId: session.sessionId, reply: reply.slice(0, 200) },
            'Slybroadcast did not stop a session',
          );
        else {
          // A stopped session is not asked about again (a disposition posted after all is still read).
          await noteChecked(db, session.deliveryId, undefined);
          log.info({ dropId: job.data.id, sessionId: session.sessionId }, 'Slybroadcast session stopped');
        }
      } catch (error) {
        // Not fatal: the drop is cancelled in Hopper whatever Slybroadcast answers.
        log.warn({ dropId: job.data.id, sessionId: session.sessionId, err: error }, 'Slybroadcast session not stopped');
      }
    }
  });

  return async () => {
    for (const name of Object.values(PROVIDER_QUEUES)) await boss.offWork(name, { wait: true });
  };
}

/** One status check of a Slybroadcast delivery (`callstatus`), and the next one planned if still unanswered. */
function slybroadcastCheck({ db, config, clock, log, queue }: Deps): (deliveryId: number) => Promise<void> {
  const { boss } = queue;
  return async (deliveryId) => {
    if (!config.slybroadcast) return;
    const delivery = await findDelivery(db, deliveryId);
    const submission = await findSubmission(db, deliveryId);
    if (!delivery || !submission || !delivery.provider_message_id) return;
    if (isPending(delivery.state)) throw new Error(`delivery ${deliveryId} is not recorded as sent yet`);
    // Nothing more to ask: the result came, the checks ran out, or the session was stopped.
    if (submission.next_check_at === null) return;
    if (delivery.state !== 'sent') {
      await noteChecked(db, deliveryId, undefined);
      return;
    }
    const now = clock();
    let outcome: ReturnType<typeof readCallStatus>;
    try {
      const reply = await slybroadcastControl(config.slybroadcast, 'callstatus', {
        session_id: delivery.provider_message_id,
        c_phone: delivery.address,
      });
      outcome = readCallStatus(reply, delivery.provider_message_id, delivery.address, now);
    } catch (error) {
      log.warn({ deliveryId, err: error }, 'Slybroadcast call status not read');
    }
    if (outcome) {
      const result = await recordOutcomes(db, SLYBROADCAST_SOURCE, 'Slybroadcast', [outcome], now);
      await noteChecked(db, deliveryId, undefined);
      log.info({ deliveryId, recorded: result.recorded }, 'Slybroadcast disposition recovered by callstatus');
      return;
    }
    if (submission.checks + 1 >= SLYBROADCAST_MAX_CHECKS) {
      await noteChecked(db, deliveryId, undefined);
      log.warn({ deliveryId }, `no Slybroadcast disposition after ${SLYBROADCAST_MAX_CHECKS} status checks: the delivery stays sent`);
      return;
    }
    const next = new Date(now.getTime() + config.slybroadcastResultTimeoutMs);
    // Stopped meanwhile (the cancel job): no next check.
    if (await noteChecked(db, deliveryId, next))
      await sendProviderJob(boss, PROVIDER_QUEUES.check, { deliveryId }, inRealTime(config.slybroadcastResultTimeoutMs));
  };
}
