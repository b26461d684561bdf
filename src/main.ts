import { setFlagsFromString } from 'node:v8';
import { ConfigError, loadConfig } from './config.ts';
import { openDatabase } from './db/database.ts';
import { openJobQueue } from './db/job-queue.ts';
import { DatabaseInUseError } from './db/pglite-lock.ts';
import type { App } from './http/context.ts';
import { type BootstrapResult, bootstrapAdministrator } from './identity/bootstrap.ts';
import { createLogger } from './log.ts';
import { systemClock } from './time.ts';
import { loadTls } from './tls.ts';
import { startWorkers, type Workers } from './workers.ts';

/**
 * Starts the roles this process plays (ROLE=all|api|worker) and closes them gracefully on
 * SIGTERM/SIGINT: stop accepting and finish in-flight requests, stop workers, close the database.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  // A worker allocates fast and keeps little (about 50 MB live): with V8's default growth on a
  // large machine its heap balloons to several hundred MB of garbage between collections. Sized
  // for memory, it peaks near 150 MB at the same throughput (bench/send.ts).
  if (config.role !== 'api') setFlagsFromString('--optimize-for-size');
  const logger = createLogger(config);
  const database = await openDatabase(config);
  const queue = await openJobQueue(database, config);
  let app: App | undefined;
  let workers: Workers | undefined;
  const shutdown = onceShutdown(async () => {
    await app?.close();
    await workers?.stop();
    await queue.stop();
    await database.close();
  });
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);

  const bootstrap = await bootstrapAdministrator(database.db, config);

  if (config.role === 'all' || config.role === 'worker') {
    workers = await startWorkers({ database, config, queue, clock: systemClock, log: logger });
  }
  if (config.role === 'all' || config.role === 'api') {
    const tls = config.trustProxy ? undefined : await loadTls(config);
    // Loaded only by processes that serve HTTP: a worker never pays for Fastify and the routes.
    const { buildApp } = await import('./app.ts');
    app = await buildApp(config, { database, queue, logger, https: tls && { key: tls.key, cert: tls.cert } });
    await app.listen({ port: config.port, host: config.host });
    if (bootstrap.kind === 'first-start') printFirstStart(config.publicUrl, bootstrap, tls?.certFile);
  } else if (bootstrap.kind === 'first-start') {
    printFirstStart(config.publicUrl, bootstrap, undefined);
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
