import type { PgBoss } from 'pg-boss';

/**
 * The voicemail providers' own jobs (pg-boss), beside the sending engine's:
 *
 * - `voicemail-provider-result`: a provider result stored before the engine recorded the
 *   hand-over is applied once it has (retried until then);
 * - `voicemail-result-check`: a Slybroadcast drop still without a disposition is asked about
 *   (`c_option=callstatus`);
 * - `message-cancelled`: a message was cancelled while Sending; its channel stops what the
 *   provider still holds (Slybroadcast: `c_option=stop` per session).
 */
export const PROVIDER_QUEUES = {
  result: 'voicemail-provider-result',
  check: 'voicemail-result-check',
  cancelled: 'message-cancelled',
} as const;
type ProviderQueue = (typeof PROVIDER_QUEUES)[keyof typeof PROVIDER_QUEUES];

export interface DeliveryJob {
  deliveryId: number;
}
export interface CancelledJob {
  kind: 'voicemail_drop' | 'templated_email';
  id: number;
}

const OPTIONS: Record<ProviderQueue, Parameters<PgBoss['createQueue']>[1]> = {
  [PROVIDER_QUEUES.result]: { retryLimit: 60, retryDelay: 2, expireInSeconds: 120 },
  [PROVIDER_QUEUES.check]: { retryLimit: 20, retryDelay: 5, retryBackoff: true, expireInSeconds: 300 },
  [PROVIDER_QUEUES.cancelled]: { retryLimit: 5, retryDelay: 5, retryBackoff: true, expireInSeconds: 600 },
};

const ensured = new WeakMap<PgBoss, Map<string, Promise<void>>>();

/** Creates (or updates) a queue once per process; API processes send to queues workers create. */
export function ensureProviderQueue(boss: PgBoss, name: ProviderQueue): Promise<void> {
  let queues = ensured.get(boss);
  if (!queues) {
    queues = new Map();
    ensured.set(boss, queues);
  }
  let done = queues.get(name);
  if (!done) {
    done = (async () => {
      if (await boss.getQueue(name)) await boss.updateQueue(name, OPTIONS[name] as never);
      else await boss.createQueue(name, OPTIONS[name]);
    })();
    done.catch(() => queues.delete(name));
    queues.set(name, done);
  }
  return done;
}

export async function sendProviderJob(
  boss: PgBoss,
  name: ProviderQueue,
  data: DeliveryJob | CancelledJob,
  startAfter?: Date,
): Promise<void> {
  await ensureProviderQueue(boss, name);
  await boss.send(name, data as object, startAfter ? { startAfter } : {});
}
