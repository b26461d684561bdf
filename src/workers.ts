import type { FastifyBaseLogger } from 'fastify';
import type { Config } from './config.ts';
import type { DatabaseHandle } from './db/database.ts';
import type { JobQueue } from './db/job-queue.ts';
import { emailChannel } from './email/email-channel.ts';
import { mailSendingPaused } from './email/sending-pause-notice.ts';
import { loadTrackingTokens } from './email/tokens.ts';
import { createMailTransport } from './email/transport.ts';
import type { SendingPause } from './identity/users.ts';
import type { DNSResolver } from './inbound/authentication.ts';
import type { InboundReceiver } from './inbound/receiver.ts';
import { type EngineSettings, SendingEngine } from './sending/engine.ts';
import type { Clock } from './time.ts';
import { loadTls } from './tls.ts';
import { startVoicemailSending } from './voicemail/voicemail-channel.ts';
import { startWebhookWorker, type WebhookWorker } from './webhooks/webhook-worker.ts';

export interface Workers {
  engine: SendingEngine;
  /** The inbound mail receiver, when INBOUND_DOMAIN is set. */
  inbound: InboundReceiver | undefined;
  webhooks: WebhookWorker;
  stop(): Promise<void>;
}

export function engineSettings(config: Config): EngineSettings {
  // Enough in flight to keep every pooled SMTP connection busy, and no more: a message queued
  // inside the pool cannot be called back by a cancel.
  const sendConcurrency = config.smtpUrl ? config.smtpMaxConnections : 4;
  return {
    batchSize: config.sendBatchSize,
    sendConcurrency,
    // Two per connection: one message at its final dot, one accepted and waiting for its record.
    // With one, each connection waited at its dot for the record before it (docs/sending.md).
    handOverSlots: 2 * sendConcurrency,
    recordEvery: Math.min(config.sendBatchSize, 20),
    loops: 2,
    parallelism: 8,
    leaseMs: config.sendLeaseMs,
    statusCheckMs: Math.min(250, Math.floor(config.sendLeaseMs / 4)),
    retryBaseMs: config.sendRetryBaseMs,
    retryMaxMs: 3_600_000,
    maxAttempts: 8,
    maxJobMs: 600_000,
    sweepIntervalMs: 30_000,
  };
}

/** The worker role: the sending engine with its channels. */
export async function startWorkers(deps: {
  database: DatabaseHandle;
  config: Config;
  queue: JobQueue;
  clock: Clock;
  log: FastifyBaseLogger;
  /** How the inbound receiver's SPF, DKIM and DMARC checks ask the DNS (tests answer offline); DNS_SERVERS or the system's when absent. */
  dnsResolver?: DNSResolver;
}): Promise<Workers> {
  const transport = createMailTransport(deps.config, deps.clock, deps.log);
  const tokens = await loadTrackingTokens(deps.database.db, deps.clock);
  const voicemail = await startVoicemailSending(deps);
  const channels = { templated_email: emailChannel(deps.database.db, deps.config, transport, tokens), voicemail_drop: voicemail.channel };
  const onSendingPaused = (userId: number, pause: SendingPause) => {
    mailSendingPaused({ ...deps, db: deps.database.db, mail: transport }, userId, pause).catch((error: unknown) =>
      deps.log.warn({ err: error, user: userId }, 'the email about a paused sender failed'),
    );
  };
  const engine = new SendingEngine({ ...deps, channels, onSendingPaused }, engineSettings(deps.config));
  await engine.start();
  // STARTTLS with the service's certificate (the operator's, or the generated one).
  // Loaded only when on: smtp-server and mailparser cost a plain worker seconds of start-up.
  const inbound = deps.config.inbound
    ? await (await import('./inbound/receiver.ts')).startInboundReceiver({
        db: deps.database.db,
        config: deps.config,
        tokens,
        transport,
        clock: deps.clock,
        log: deps.log,
        tls: await loadTls(deps.config),
        resolver: deps.dnsResolver,
      })
    : undefined;
  const webhooks = await startWebhookWorker({ ...deps, mail: transport });
  deps.log.info({ smtp: deps.config.smtpUrl ? 'pool' : 'outbox' }, 'sending engine started');
  return {
    engine,
    inbound,
    webhooks,
    async stop() {
      await inbound?.stop();
      await webhooks.stop();
      await engine.stop();
      await voicemail.stop();
      transport.close();
    },
  };
}
