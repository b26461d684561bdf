import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import type { PgBoss } from 'pg-boss';
import type { Config } from '../../config.ts';
import type { Db } from '../../db/database.ts';
import type { OutcomeReason } from '../../db/schema.ts';
import { type Clock, inRealTime } from '../../time.ts';
import { recordOutcomes } from '../dispositions.ts';
import type { VoicemailAdapter } from '../providers.ts';

/**
 * The Sandbox provider, for trials and tests: it accepts every drop, writes it to
 * `DATA_DIR/voicemail/<delivery id>.json`, and reports the outcome after SANDBOX_DELAY through the
 * same path as a real provider's callback. Numbers ending in 0000 to 0004 fail, each with its own
 * outcome (SANDBOX_FAILURES), so failure handling — and the suppression of dead numbers — can be
 * tried without a provider account. The report is a delayed job, not a timer: it survives the
 * worker process that sent the drop.
 */
const SANDBOX_SOURCE = 'sandbox';
const SANDBOX_QUEUE = 'voicemail-sandbox-outcome';

/** The failing endings and what each says (docs/outcomes.md, "Sandbox"). */
const SANDBOX_FAILURES: Record<string, OutcomeReason> = {
  '0000': { classification: 'no_voicemail_box', permanent: false, code: 'no_voicemail', description: 'No voicemail box on this number' },
  '0001': { classification: 'landline', permanent: true, suppress: true, code: 'landline', description: 'The number is a landline' },
  '0002': { classification: 'mailbox_full', permanent: false, code: 'mailbox_full', description: 'The voicemail box is full' },
  '0003': { classification: 'dnc', permanent: true, suppress: true, code: 'dnc', description: 'The number is on a Do-Not-Call list' },
  '0004': {
    classification: 'invalid_number',
    permanent: true,
    suppress: true,
    code: 'invalid_number',
    description: 'The number is disconnected',
  },
};
const DELIVERED: OutcomeReason = {
  classification: 'delivered',
  permanent: false,
  code: 'delivered',
  description: 'Left in the voicemail box',
};

interface SandboxJob {
  deliveryId: number;
  delivered: boolean;
  reason: string | null;
  /** Absent in jobs queued before outcomes were recorded. */
  outcome?: OutcomeReason;
}

export function sandboxAdapter(config: Config, boss: PgBoss, clock: Clock): VoicemailAdapter {
  const dir = join(config.dataDir, 'voicemail');
  return {
    provider: 'Sandbox',
    async submit(drop) {
      const ending = drop.phone.slice(-4);
      const failure = SANDBOX_FAILURES[ending];
      const delivered = !failure;
      const reason = failure ? `Sandbox: numbers ending in ${ending} always fail (${failure.description})` : null;
      const record = {
        delivery_id: drop.deliveryId,
        phone: drop.phone,
        caller_id: drop.callerId,
        audio_url: drop.audioUrl,
        audio_type: drop.audioType,
        submitted_at: clock().toISOString(),
        outcome: delivered ? 'delivered' : 'failed',
        reason,
        classification: (failure ?? DELIVERED).classification,
      };
      await mkdir(dir, { recursive: true });
      const file = join(dir, `${drop.deliveryId}.json`);
      await writeFile(`${file}.tmp`, `${JSON.stringify(record, null, 2)}\n`);
      await rename(`${file}.tmp`, file);
      const job: SandboxJob = { deliveryId: drop.deliveryId, delivered, reason, outcome: failure ?? DELIVERED };
      await boss.send(SANDBOX_QUEUE, job, { startAfter: inRealTime(config.sandboxDelayMs) });
      return { ok: true, reference: `sandbox-${drop.deliveryId}` };
    },
  };
}

/** Works the Sandbox's delayed reports (in worker processes, next to the sending engine). */
export async function startSandboxReports(boss: PgBoss, db: Db, clock: Clock, log: FastifyBaseLogger): Promise<() => Promise<void>> {
  const options = { retryLimit: 30, retryDelay: 1, expireInSeconds: 60 };
  if (await boss.getQueue(SANDBOX_QUEUE)) await boss.updateQueue(SANDBOX_QUEUE, options);
  else await boss.createQueue(SANDBOX_QUEUE, options);
  await boss.work<SandboxJob>(SANDBOX_QUEUE, { pollingIntervalSeconds: 0.5, batchSize: 1 }, async ([job]) => {
    if (!job) return;
    const { deliveryId, delivered, reason } = job.data;
    const outcome = job.data.outcome ?? (delivered ? DELIVERED : { classification: 'failed', permanent: false, description: reason });
    const now = clock();
    const result = await recordOutcomes(
      db,
      SANDBOX_SOURCE,
      'Sandbox',
      [{ deliveryId, eventId: String(deliveryId), delivered, reason, outcome, occurredAt: now }],
      now,
    );
    // The report can beat the engine's record of the hand-over; the queue tries again shortly.
    if (result.early > 0) throw new Error(`delivery ${deliveryId} is not recorded as sent yet`);
    if (result.unknown > 0) log.warn({ deliveryId }, 'Sandbox report for an unknown delivery ignored');
  });
  return () => boss.offWork(SANDBOX_QUEUE, { wait: true });
}
