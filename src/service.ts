import { createServer, Server as NetServer } from 'node:net';
import { constants } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { type Config, ConfigError, loadConfig } from './config.ts';
import { type DatabaseHandle, openDatabase } from './db/database.ts';
import { type JobQueue, openJobQueue } from './db/job-queue.ts';
import { DatabaseInUseError } from './db/pglite-lock.ts';
import type { App } from './http/fastify-types.ts';
import { type BootstrapResult, bootstrapAdministrator } from './identity/bootstrap.ts';
import { createLogger, type Logger } from './log.ts';
import { realTimeMs, systemClock } from './time.ts';
import { loadTls } from './tls.ts';
import type { Workers } from './workers.ts';

/** What this process has opened so far; `stopRunning` closes each once. */
interface Running {
  database?: DatabaseHandle;
  queue?: JobQueue;
  app?: App;
  workers?: Workers;
}

/**
 * Starts the roles this process plays (ROLE=all|api|worker) and closes them gracefully on
 * SIGTERM/SIGINT: stop accepting and finish in-flight requests, stop workers, close the database.
 * The signals are heard from the start: one that arrives while the database opens or migrates lets
 * that step finish, then stops.
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
  const running: Running = {};
  let stopping = false;
  let starting: Promise<void> = Promise.resolve();
  onStopSignals(logger, async () => {
    stopping = true;
    const since = realTimeMs();
    logger.info({ timeoutMs: config.shutdownTimeoutMs }, 'stopping');
    await starting.catch(() => {});
    await stopRunning(running, config);
    logger.info({ ms: Math.round(realTimeMs() - since) }, 'stopped');
  });
  starting = start(config, logger, running, () => stopping);
  try {
    await starting;
  } catch (error) {
    // What did open is closed (the embedded database's lock released) before the error is told.
    await stopRunning(running, config).catch(() => {});
    throw error;
  }
}

/** The start-up, step by step; it returns early once a signal asked to stop (`stopping()`). */
async function start(config: Config, logger: Logger, running: Running, stopping: () => boolean): Promise<void> {
  const serves = config.role === 'all' || config.role === 'api';
  // Before anything is created: a first start that could not listen must not store an
  // Administrator whose key and password it never showed.
  if (serves) await checkPortFree(config);
  // Modules load while the database opens (docs/performance.md: start-up). A worker never pays for
  // Fastify and the routes; the channels load after the API listens.
  const appModule = serves ? import('./app.ts') : undefined;
  appModule?.catch(() => {});
  const database = await openDatabase(config, logger);
  running.database = database;
  // The job queue starts while the first Administrator is checked and the certificate is read.
  const openingQueue = openJobQueue(database, config);
  openingQueue.catch(() => {});
  const tlsLoading = serves && !config.trustProxy ? loadTls(config) : undefined;
  tlsLoading?.catch(() => {});
  const bootstrap = await bootstrapAdministrator(database.db, config);
  running.queue = await openingQueue;
  if (stopping()) return;
  let certFile: string | undefined;
  if (appModule) {
    const tls = await tlsLoading;
    certFile = tls?.certFile;
    const { buildApp } = await appModule;
    const app = await buildApp(config, { database, queue: running.queue, logger, https: tls && { key: tls.key, cert: tls.cert } });
    if (stopping()) return;
    running.app = app;
    try {
      await app.listen({ port: config.port, host: config.host });
    } catch (error) {
      // Taken since checkPortFree looked: the first Administrator exists now, so its key is shown.
      if (bootstrap.kind === 'first-start') printFirstStart(config.publicUrl, bootstrap, certFile);
      throw listenError(error, config, '');
    }
  }
  if (bootstrap.kind === 'first-start') printFirstStart(config.publicUrl, bootstrap, certFile);
  if (stopping() || config.role === 'api') return;
  const { startWorkers } = await import('./workers.ts');
  running.workers = await startWorkers({ database, config, queue: running.queue, clock: systemClock, log: logger });
}

/**
 * Closes what `running` holds, in this order so nothing is closed under a user of it: HTTP first
 * (no new connections; requests in flight finish, for SHUTDOWN_TIMEOUT at most; requests arriving
 * on kept-alive connections are still answered, with `Connection: close`), then the workers (they
 * record what they sent and give back what they had not started), then the job queue, then the
 * database. Each is taken out before it is closed, so a second call closes nothing twice.
 */
async function stopRunning(running: Running, config: Config): Promise<void> {
  const { app, workers, queue, database } = running;
  delete running.app;
  delete running.workers;
  delete running.queue;
  delete running.database;
  if (app) await closeHttp(app, config.shutdownTimeoutMs);
  await workers?.stop();
  await queue?.stop();
  await database?.close();
}

/** Signals within this long of the first are the same request to stop (see onStopSignals). */
const SAME_SIGNAL_MS = 1_000;

/**
 * SIGTERM and SIGINT start one graceful stop (`stop`), then exit 0. A Ctrl-C in a terminal reaches
 * this process twice — from the terminal, which signals its whole process group, and again from
 * `npm start`, which forwards what it receives to its script — so a signal within SAME_SIGNAL_MS
 * of the first is the same one. A later one (a second Ctrl-C, someone who will not wait) stops at
 * once: requests in flight are cut and nothing more is recorded; what the workers had handed over
 * unrecorded is taken over after its lease, as after a crash (docs/operations.md).
 */
function onStopSignals(logger: Logger, stop: () => Promise<void>): void {
  let first: number | undefined;
  const heard = (signal: NodeJS.Signals) => {
    const now = realTimeMs();
    if (first === undefined) {
      first = now;
      stop().then(
        () => process.exit(0),
        (error: unknown) => {
          logger.error({ err: error }, 'stopping failed');
          process.exit(1);
        },
      );
    } else if (now - first >= SAME_SIGNAL_MS) {
      logger.warn({ signal }, 'stopped at once: a second signal came while stopping');
      process.exit(128 + constants.signals[signal]);
    }
  };
  process.on('SIGTERM', heard);
  process.on('SIGINT', heard);
}

/** Why the service cannot listen, naming the variable to change. */
class ListenError extends Error {
  override name = 'ListenError';
}

/** Refuses to go on when PORT on HOST cannot be listened on: taken by another program, or not ours to take. */
async function checkPortFree(config: Config): Promise<void> {
  if (config.port === 0) return;
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ port: config.port, host: config.host, exclusive: true }, resolve);
    });
  } catch (error) {
    throw listenError(error, config, ' Nothing was created.');
  } finally {
    await new Promise((resolve) => probe.close(resolve));
  }
}

/** A listen failure in words an operator acts on (`after` ends them); other errors as they are. */
function listenError(error: unknown, config: Config, after: string): unknown {
  const where = `${config.host}:${config.port}`;
  switch ((error as NodeJS.ErrnoException).code) {
    case 'EADDRINUSE':
      return new ListenError(
        `Cannot listen on ${where}: another program is using port ${config.port}. ` +
          `Set PORT to a free port (PORT=8444 npm start), or stop the other program.${after}`,
      );
    case 'EACCES':
      return new ListenError(
        `Cannot listen on ${where}: port ${config.port} needs privileges this process does not have. ` +
          `Set PORT to 1024 or above (the default is 8443).${after}`,
      );
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
      return new ListenError(
        `Cannot listen on ${where}: HOST is not an address of this machine. ` +
          `Set HOST to one of its addresses, 127.0.0.1 (the default) or 0.0.0.0 for every interface.${after}`,
      );
    default:
      return error;
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
  const started = realTimeMs();
  let lastRequest = started;
  server.prependListener('request', (_request, response) => {
    lastRequest = realTimeMs();
    response.setHeader('Connection', 'close');
  });
  // The listening socket alone (net.Server's close): http.Server's would also close idle connections now.
  NetServer.prototype.close.call(server);
  while (realTimeMs() - lastRequest < QUIET_MS && realTimeMs() - started < timeoutMs) {
    await new Promise((resolve) => setTimeout(resolve, QUIET_MS / 5));
    // After the sockets' pending reads (the poll phase), not before them.
    await new Promise((resolve) => setImmediate(resolve));
  }
  const closed = app.close();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), Math.max(0, timeoutMs - (realTimeMs() - started)));
  });
  if ((await Promise.race([closed, late])) === 'late') {
    app.log.warn({ timeoutMs }, 'requests still running at SHUTDOWN_TIMEOUT: their connections are closed');
    app.server.closeAllConnections();
  }
  clearTimeout(timer);
  await closed;
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof DatabaseInUseError || error instanceof ListenError) {
    console.error(error.message);
    process.exit(2);
  }
  console.error(error);
  process.exit(1);
});
