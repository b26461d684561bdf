import { isIP } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { JobQueue } from '../db/job-queue.ts';
import { findOwnedMedia, publicFileUrl } from '../media/media.ts';
import type { Channel } from '../sending/channel.ts';
import { type Clock, inRealTime } from '../time.ts';
import { checkCallingHours } from './calling-hours.ts';
import { startProviderJobHandlers } from './provider-job-handlers.ts';
import { PROVIDER_QUEUES, sendProviderJob } from './provider-queues.ts';
import { DropCowboyAdapter } from './providers/drop-cowboy.ts';
import { sandboxAdapter, startSandboxReports } from './providers/sandbox.ts';
import { slybroadcastAdapter, slybroadcastCallbackToken } from './providers/slybroadcast.ts';
import { type DropAudioType, dropAudioType, type VoicemailAdapter, type VoicemailProvider } from './providers.ts';
import { ensureSubmission, noteAccepted } from './submissions.ts';

interface VoicemailDeps {
  database: DatabaseHandle;
  config: Config;
  queue: JobQueue;
  clock: Clock;
  log: FastifyBaseLogger;
}

/** Each provider's name as the source of its outcomes (docs/outcomes.md): the source of its delivery events. */
const PROVIDER_SOURCES: Record<VoicemailProvider, string> = {
  'Drop Cowboy': 'dropcowboy',
  Slybroadcast: 'slybroadcast',
  Sandbox: 'sandbox',
};

/** What every delivery of one drop shares: its provider and its audio, or why none can go out. */
type PreparedDrop =
  | { ok: true; adapter: VoicemailAdapter; callerId: string; mediaId: number; audioUrl: string; audioType: DropAudioType }
  | { ok: false; reason: string };

interface VoicemailSending {
  channel: Channel<'voicemail_drop', PreparedDrop>;
  stop(): Promise<void>;
}

/**
 * The voicemail channel of the sending engine: each delivery goes to the adapter of its drop's
 * provider, inside calling hours only — outside them the delivery is held until the window
 * opens (the engine asks for delivery work at that time). Started in worker processes.
 */
export async function startVoicemailSending(deps: VoicemailDeps): Promise<VoicemailSending> {
  const { config, clock, log } = deps;
  const { db } = deps.database;
  const adapters = new Map<VoicemailProvider, VoicemailAdapter>();
  let stopSandbox: (() => Promise<void>) | undefined;
  if (config.sandboxVoicemail) {
    stopSandbox = await startSandboxReports(deps.queue.boss, db, clock, log);
    adapters.set('Sandbox', sandboxAdapter(config, deps.queue.boss, clock));
  }
  if (config.slybroadcast) {
    const dispositionUrl = async () => `${config.publicUrl}/v3/callbacks/slybroadcast/${await slybroadcastCallbackToken(db, clock)}`;
    adapters.set('Slybroadcast', slybroadcastAdapter(config.slybroadcast, dispositionUrl));
  }
  if (config.dropCowboy) adapters.set('Drop Cowboy', new DropCowboyAdapter(config.dropCowboy, config.publicUrl, db, clock, log));
  const stopProviderJobHandlers = config.slybroadcast || config.dropCowboy ? await startProviderJobHandlers({ ...deps, db }) : undefined;
  if ((config.slybroadcast || config.dropCowboy) && !publiclyReachable(config.publicUrl)) {
    log.warn(
      { publicUrl: config.publicUrl },
      'PUBLIC_URL does not look reachable from the internet: voicemail providers download the audio and post outcomes there',
    );
  }

  const channel: Channel<'voicemail_drop', PreparedDrop> = {
    async prepare(drop) {
      const adapter = adapters.get(drop.provider as VoicemailProvider);
      if (!adapter) return { ok: false, reason: `The provider ${drop.provider} is not configured on this server.` };
      const media = await findOwnedMedia(db, drop.user_id, drop.media_id);
      // A deleted item's public URL no longer serves the file, so the provider could not fetch it.
      if (!media) return { ok: false, reason: `The drop's audio (media ${drop.media_id}) was deleted.` };
      const audioType = dropAudioType(media.mime_type);
      if (!audioType) return { ok: false, reason: `The drop's audio is ${media.mime_type}; providers play WAV, MP3 and M4A only.` };
      const audioUrl = publicFileUrl(config.publicUrl, media);
      return { ok: true, adapter, callerId: drop.callback_number, mediaId: drop.media_id, audioUrl, audioType };
    },

    async deliver(prepared, delivery, handOver) {
      if (!prepared.ok) return { kind: 'failed', error: prepared.reason };
      const hours = checkCallingHours(delivery.address, delivery.time_zone, clock());
      if (!hours.allowed) return { kind: 'held', until: hours.until, reason: hours.reason };
      // The submission is the act that cannot be taken back.
      await handOver?.();
      const result = await prepared.adapter.submit({
        deliveryId: Number(delivery.id),
        phone: delivery.address,
        callerId: prepared.callerId,
        mediaId: prepared.mediaId,
        audioUrl: prepared.audioUrl,
        audioType: prepared.audioType,
      });
      if (result.ok && prepared.adapter.provider === 'Slybroadcast')
        await awaitDisposition(Number(delivery.id), delivery.address, result.reference);
      if (result.ok) return { kind: 'sent', ...(result.reference ? { providerMessageId: result.reference } : {}) };
      const outcome = result.outcome ? { outcome: { ...result.outcome, source: PROVIDER_SOURCES[prepared.adapter.provider] } } : {};
      if (!result.retryable) return { kind: 'failed', error: result.reason, ...outcome };
      const notBefore = result.retryAfterMs === undefined ? {} : { notBefore: new Date(clock().getTime() + result.retryAfterMs) };
      return { kind: 'deferred', error: result.reason, ...outcome, ...notBefore };
    },
  };

  /**
   * Slybroadcast may never post a disposition: after SLYBROADCAST_RESULT_TIMEOUT the delivery is
   * asked about (`callstatus`). Best effort: a drop handed over is not failed for want of it.
   */
  async function awaitDisposition(deliveryId: number, phone: string, sessionId: string | undefined): Promise<void> {
    if (!sessionId) return;
    try {
      await ensureSubmission(db, { deliveryId, provider: 'Slybroadcast', phone }, clock());
      await noteAccepted(db, deliveryId, sessionId, new Date(clock().getTime() + config.slybroadcastResultTimeoutMs));
      await sendProviderJob(deps.queue.boss, PROVIDER_QUEUES.check, { deliveryId }, inRealTime(config.slybroadcastResultTimeoutMs));
    } catch (error) {
      log.error({ deliveryId, err: error }, 'Slybroadcast status check not scheduled');
    }
  }

  return {
    channel,
    async stop() {
      await stopProviderJobHandlers?.();
      await stopSandbox?.();
    },
  };
}

/** False for localhost, loopback and private addresses, which no provider can reach. */
function publiclyReachable(publicUrl: string): boolean {
  const host = new URL(publicUrl).hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host.endsWith('.localhost') || host.endsWith('.local')) return false;
  if (!isIP(host)) return true;
  return !/^(127\.|10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.|169\.254\.|0\.|::1$|f[cd]|fe80:)/i.test(host);
}
