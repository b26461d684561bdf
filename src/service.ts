import { Server as NetServer } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { ConfigError, loadConfig } from './config.ts';
import { openDatabase } from './db/database.ts';
import { openJobQueue } from './db/job-queue.ts';
import { DatabaseInUseError } from './db/pglite-lock.ts';
import type { App } from './http/fastify-types.ts';
import { type BootstrapResult, bootstrapAdministrator } from './identity/bootstrap.ts';
import { createLogger } from './log.ts';
import { systemClock } from './time.ts';
import { loadTls } from './tls.ts';
import type { Workers } from './workers.ts';

/**
 * Starts the roles this process plays (ROLE=all|api|worker) and closes them gracefully on
 * SIGTERM/SIGINT: stop accepting and finish in-flight requests, stop workers, close the database.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  // A dedicated worker allocates fast and keeps little (about 50 MB live): with V8's default growth
  // on a large machine its heap balloons to several hundred MB of garbage between collections.
  // Sized for memory, it peaks near 150 MB at the same throughput (bench/send.ts). Not when the
  // process also serves the API (ROLE=all): there the memory-reducing collections cost a search
  // of 15 drops 1.7 ms of collection and halved its throughput (docs/performance.md).
  if (config.role === 'worker') setFlagsFromString('--optimize-for-size');
  const logger = createLogger(config);
  const serves = config.role === 'all' || config.role === 'api';
  // Modules load while the database opens (docs/performance.md: start-up). A worker never pays for
  // Fastify and the routes; the channels load after the API listens.
  const appModule = serves ? import('./app.ts') : undefined;
  appModule?.catch(() => {});
  const database = await openDatabase(config, logger);
  // The job queue starts while the first Administrator is checked and the certificate is read.
  const openingQueue = openJobQueue(database, config);
  openingQueue.catch(() => {});
  const tlsLoading = serves && !config.trustProxy ? loadTls(config) : undefined;
  tlsLoading?.catch(() => {});
  const bootstrap = await bootstrapAdministrator(database.db, config);
  const queue = await openingQueue;
  let app: App | undefined;
  let workers: Workers | undefined;
  let startingWorkers: Promise<void> = Promise.resolve();
  let stopping = false;
  // In this order, so nothing is closed under a user of it: HTTP first (no new connections; requests
  // in flight finish, for SHUTDOWN_TIMEOUT at most; requests arriving on kept-alive connections are
  // still answered, with `Connection: close`), then the workers (they record what they sent and
  // give back what they had not started), then the job queue, then the database.
  const shutdown = onceShutdown(async () => {
    stopping = true;
    logger.info({ timeoutMs: config.shutdownTimeoutMs }, 'stopping');
    if (app) await closeHttp(app, config.shutdownTimeoutMs);
    // Workers still starting are let finish, then stopped: never a queue closed under their start.
    await startingWorkers.catch(() => {});
    await workers?.stop();
    await queue.stop();
    await database.close();
  });
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);

  if (stopping) return;
  if (appModule) {
    const tls = await tlsLoading;
    const { buildApp } = await appModule;
    const built = await buildApp(config, { database, queue, logger, https: tls && { key: tls.key, cert: tls.cert } });
    if (stopping) return;
    app = built;
    await app.listen({ port: config.port, host: config.host });
    if (bootstrap.kind === 'first-start') printFirstStart(config.publicUrl, bootstrap, tls?.certFile);
  } else if (bootstrap.kind === 'first-start') {
    printFirstStart(config.publicUrl, bootstrap, undefined);
  }
  if (stopping) return;
  if (config.role === 'all' || config.role === 'worker') {
    startingWorkers = import('./workers.ts').then(async ({ startWorkers }) => {
      workers = await startWorkers({ database, config, queue, clock: systemClock, log: logger });
    });
    await startingWorkers;
  }
}

type FirstStart = Extract<BootstrapResult, { kind: 'first-start' }>;

function printFirstStart(publicUrl: string, first: FirstStart, certFile: string | undefined): void {
  const { email, key, password } = first;
  const caFlag = certFile ? ` --cacert ${certFile}` : '';
  process.stdout.write(
    [
      '',
      `Hopper created its first Administrator (${email}). Its API key, shown this once:`,
      '',
      `    ${key}`,
      '',
      `Base URL: ${publicUrl}/v3`,
      `Try:      curl${caFlag} -H 'Authorization: Bearer ${key}' ${publicUrl}/v3/users`,
      '',
      `Sign in to ${publicUrl}/login as ${email} with this password, also shown this once:`,
      '',
      `    ${password}`,
      '',
      '',
    ].join('\n'),
  );
}

/** How long no request may arrive on an open connection before those left idle are closed. */
const QUIET_MS = 250;

/**
 * Closes the HTTP server without cutting a request a client has already sent. New connections are
 * refused at once, but kept-alive ones stay open until no request has arrived for QUIET_MS: a
 * request sent just before the signal may still be unread — on PGlite, whose queries run on this
 * thread, for as long as a query takes — and closing its connection as idle would cut it. Every
 * answer from now on says `Connection: close`. Requests still running after `timeoutMs` have
 * their connections cut.
 */
async function closeHttp(app: App, timeoutMs: number): Promise<void> {
  const server = app.server;
  const started = Date.now();
  let lastRequest = started;
  server.prependListener('request', (_request, response) => {
    lastRequest = Date.now();
    response.setHeader('Connection', 'close');
  });
  // The listening socket alone (net.Server's close): http.Server's would also close idle connections now.
  NetServer.prototype.close.call(server);
  while (Date.now() - lastRequest < QUIET_MS && Date.now() - started < timeoutMs) {
    await new Promise((resolve) => setTimeout(resolve, QUIET_MS / 5));
    // After the sockets' pending reads (the poll phase), not before them.
    await new Promise((resolve) => setImmediate(resolve));
  }
  const closed = app.close();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), Math.max(0, timeoutMs - (Date.now() - started)));
  });
  if ((await Promise.race([closed, late])) === 'late') {
    app.log.warn({ timeoutMs }, 'requests still running at SHUTDOWN_TIMEOUT: their connections are closed');
    app.server.closeAllConnections();
  }
  clearTimeout(timer);
  await closed;
}

function onceShutdown(close: () => Promise<void>): () => void {
  let started = false;
  return () => {
    if (started) return;
    started = true;
    close().then(
      () => process.exit(0),
      (error) => {
        console.error('shutdown failed', error);
        process.exit(1);
      },
    );
  };
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof DatabaseInUseError) {
    console.error(error.message);
    process.exit(2);
  }
  console.error(error);
  process.exit(1);
});
