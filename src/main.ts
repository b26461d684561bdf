import { type App, buildApp } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';
import { openDatabase } from './db/database.ts';
import { DatabaseInUseError } from './db/pglite-lock.ts';
import { bootstrapAdministrator } from './identity/bootstrap.ts';
import { loadTls } from './tls.ts';

/**
 * Starts the roles this process plays (ROLE=all|api|worker) and closes them gracefully on
 * SIGTERM/SIGINT: stop accepting and finish in-flight requests, stop workers, close the database.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const database = await openDatabase(config);
  let app: App | undefined;
  const shutdown = onceShutdown(async () => {
    await app?.close();
    await database.close();
  });
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);

  const bootstrap = await bootstrapAdministrator(database.db, config);

  if (config.role === 'all' || config.role === 'api') {
    const tls = config.trustProxy ? undefined : await loadTls(config);
    app = await buildApp(config, { database, https: tls && { key: tls.key, cert: tls.cert } });
    await app.listen({ port: config.port, host: config.host });
    if (bootstrap.kind === 'first-start') printFirstStart(config.publicUrl, bootstrap.email, bootstrap.key, tls?.certFile);
  } else if (bootstrap.kind === 'first-start') {
    printFirstStart(config.publicUrl, bootstrap.email, bootstrap.key, undefined);
  }
  // ROLE=worker: background jobs arrive with the sending engine; until then a worker only holds the
  // database open and waits for a signal.
}

function printFirstStart(publicUrl: string, email: string, key: string, certFile: string | undefined): void {
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
