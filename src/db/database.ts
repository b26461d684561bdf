import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PGlite, PGliteOptions } from '@electric-sql/pglite';
import { Kysely, type LogEvent, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Config } from '../config.ts';
import { type Channel, channelName } from './channels.ts';
import { migrateToLatest } from './migrate.ts';
import { OneConnection } from './one-connection.ts';
import { acquirePgliteLock } from './pglite-lock.ts';
import { prepareRepeatedStatements } from './prepared-statements.ts';
import type { Database } from './schema.ts';
import { parseTimestamptz, TIMESTAMPTZ_OID } from './timestamps.ts';

export type Db = Kysely<Database>;

/** Runs one statement's text and parameters straight on a handle's pool (see `directRunner`). */
type DirectRunner = <Row>(text: string, parameters: readonly unknown[]) => Promise<Row[]>;
const directRunners = new WeakMap<Db, DirectRunner>();

/**
 * For a statement compiled once (db/precompiled.ts), the way to run it on a PostgreSQL handle's
 * own pool, past Kysely's executor: a connection taken, the statement, the connection given back,
 * and the statement counted in `queryCount` as Kysely's log counts the others. Kysely's executor
 * around one precompiled statement (connection provider, driver, log event, result) allocated
 * about 7 kB a read (docs/performance.md). Undefined for a transaction (it has its connection) and
 * on PGlite, which run it through Kysely.
 */
export function directRunner(db: Db): DirectRunner | undefined {
  return directRunners.get(db);
}

export interface DatabaseHandle {
  /** For workers, migrations and tools: waits as long as a statement takes. */
  readonly db: Db;
  /**
   * For HTTP requests and the health probe: on PostgreSQL, connecting and every statement are
   * bounded by DATABASE_TIMEOUT, so a database that is down or frozen makes a request fail fast
   * (503 `database_unavailable`) instead of hanging. The same database as `db` on PGlite.
   */
  readonly requestDb: Db;
  readonly kind: 'pglite' | 'postgres';
  /** The embedded database itself, when there is one (the job queue runs on it too). */
  readonly pglite: PGlite | undefined;
  /**
   * PGlite's one connection, which every request shares (undefined on PostgreSQL): background
   * work that holds it long waits for a pause in the requests' use of it (db/one-connection.ts).
   */
  readonly oneConnection: OneConnection | undefined;
  /**
   * Number of SQL statements run so far, but the rate limiter's allotments: lets tests prove a
   * request never reached the database, or how many statements it took.
   */
  queryCount(): number;
  /**
   * Calls `onNotice` with the payload of every NOTIFY on `channel`, from any process of this
   * installation (its schema's channel, db/channels.ts), and without one whenever notices may have
   * been missed (the listening connection was lost). `listening()` is false while no notice can
   * arrive: whatever the caller caches must not be trusted then.
   */
  listen(channel: Channel, onNotice: (payload?: string) => void): Promise<{ listening(): boolean }>;
  /** True when the database answers a trivial query. */
  ping(): Promise<boolean>;
  /** The request pool's connections (metrics); undefined on PGlite. */
  poolStats(): { total: number; idle: number; waiting: number; max: number } | undefined;
  close(): Promise<void>;
}

const INT8_OID = 20;
// Ids are bigint in SQL and safe integers in JSON: ids never approach 2^53.
const parseInt8 = (value: string) => Number(value);

/** Where a connection's failures are reported (a process logger); stderr when absent. */
interface DatabaseLog {
  warn(details: object, message: string): void;
}

/**
 * Opens PGlite in DATA_DIR/pgdata, or PostgreSQL when DATABASE_URL is set, and migrates it.
 *
 * On PostgreSQL a connection that breaks while idle in the pool (the server restarted, an
 * administrator ended the backend) is reported and dropped — never an unhandled 'error' that ends
 * the process — and the pool connects afresh when the server is back.
 */
export async function openDatabase(config: Config, log?: DatabaseLog): Promise<DatabaseHandle> {
  let queries = 0;
  // The rate limiter's refills are not a request's own statements: one falls on whichever request
  // first needs a new allotment (http/rate-limit.ts), at the start of every minute too.
  const count = (event: LogEvent) => {
    if (!event.query.sql.includes('rate_limit_counts')) queries++;
  };
  const schema = config.databaseSchema;
  const { db, requestDb, pool, embedded, oneConnection, releaseLock } = config.databaseUrl
    ? connectPostgres(config.databaseUrl, config, count, log, () => queries++)
    : await openPglite(config, count);

  try {
    await sql`CREATE SCHEMA IF NOT EXISTS ${sql.id(schema)}`.execute(db);
    await migrateToLatest(db as unknown as Kysely<unknown>, schema);
  } catch (error) {
    await db.destroy();
    if (requestDb !== db) await requestDb.destroy();
    releaseLock();
    throw error;
  }

  let closed = false;
  const listeners: (() => Promise<void>)[] = [];
  return {
    db,
    requestDb,
    kind: config.databaseUrl ? 'postgres' : 'pglite',
    pglite: embedded,
    oneConnection,
    queryCount: () => queries,
    async listen(base, onNotice) {
      // This installation's channel (db/channels.ts): another schema's notices never arrive.
      const channel = channelName(base, schema);
      if (embedded) {
        listeners.push(await embedded.listen(channel, onNotice));
        return { listening: () => !closed };
      }
      const listener = await listenOnPostgres(config.databaseUrl as string, channel, onNotice);
      listeners.push(listener.close);
      return listener;
    },
    poolStats: () => pool && { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: pool.options.max ?? 10 },
    async ping() {
      try {
        await sql`SELECT 1`.execute(requestDb);
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const stop of listeners) await stop();
      await db.destroy();
      if (requestDb !== db) await requestDb.destroy();
      releaseLock();
    },
  };
}

/** The two handles and what else a database holds open; on PGlite, one handle serves both. */
interface Connection {
  db: Db;
  requestDb: Db;
  /** The request pool (PostgreSQL). */
  pool?: pg.Pool;
  embedded?: PGlite;
  oneConnection?: OneConnection;
  releaseLock: () => void;
}

/** PostgreSQL: a pool for workers, migrations and tools, and one for requests, whose statements are bounded. */
function connectPostgres(
  url: string,
  config: Config,
  count: (event: LogEvent) => void,
  log: DatabaseLog | undefined,
  countDirect: () => void,
): Connection {
  const kyselyOn = (pool: pg.Pool) => {
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), log: count });
    // A connection taken with pg-pool's callback (no promise of its own), given back once the
    // statement has its answer or its error.
    directRunners.set(
      db,
      <Row>(text: string, parameters: readonly unknown[]) =>
        new Promise<Row[]>((resolve, reject) => {
          countDirect();
          pool.connect((error, client, release) => {
            if (error || !client) {
              reject(error);
              return;
            }
            client.query(text, parameters as unknown[]).then(
              (result) => {
                release();
                resolve(result.rows as Row[]);
              },
              (failure: unknown) => {
                release();
                reject(failure);
              },
            );
          });
        }),
    );
    return db;
  };
  const schema = config.databaseSchema;
  const timeout = config.databaseTimeoutMs;
  const onError = (error: Error) => {
    const details = { err: { message: error.message, code: (error as { code?: string }).code } };
    if (log) log.warn(details, 'database connection lost (it is dropped; the next query connects again)');
    else console.warn('database connection lost:', error.message);
  };
  // Workers, migrations, tools: statements may take long (a frozen server makes them wait, which
  // is how a worker pauses); connecting still gives up in time.
  const workerPool = pgPool(url, schema, { max: 20, connectionTimeoutMillis: Math.max(timeout, 5_000) }, onError);
  // Requests: the server cancels a statement past the limit; the client stops waiting a little
  // later, for a frozen server cancels nothing.
  const pool = pgPool(
    url,
    schema,
    { max: 20, connectionTimeoutMillis: timeout, query_timeout: timeout + 250, statementTimeoutMs: timeout },
    onError,
  );
  return { db: kyselyOn(workerPool), requestDb: kyselyOn(pool), pool, releaseLock: () => {} };
}

type PgliteCompiled = Pick<PGliteOptions, 'pgliteWasmModule' | 'fsBundle'>;
// WebAssembly is a global of every runtime Hopper runs on; TypeScript's es2024 library leaves it out.
const { WebAssembly: wasm } = globalThis as unknown as {
  WebAssembly: { compile(bytes: Uint8Array): Promise<PgliteCompiled['pgliteWasmModule']> };
};
let compiledPglite: Promise<PgliteCompiled> | undefined;

/**
 * PGlite's WebAssembly compiled, and its file bundle read, once per process: every later open in
 * the same process (the tests open one database after another) skips about 0.6 s of CPU. The
 * first open costs the same as without.
 */
function pgliteCompiled(): Promise<PgliteCompiled> {
  compiledPglite ??= (async () => {
    const dist = dirname(fileURLToPath(import.meta.resolve('@electric-sql/pglite')));
    const [code, bundle] = await Promise.all([readFile(join(dist, 'pglite.wasm')), readFile(join(dist, 'pglite.data'))]);
    return { pgliteWasmModule: await wasm.compile(code), fsBundle: new Blob([bundle]) };
  })();
  return compiledPglite;
}

/** PGlite in DATA_DIR/pgdata, locked against a second process opening it. */
async function openPglite(config: Config, count: (event: LogEvent) => void): Promise<Connection> {
  const dataDir = join(config.dataDir, 'pgdata');
  const releaseLock = acquirePgliteLock(`${dataDir}.lock`);
  try {
    // Loaded only here: a process on PostgreSQL never holds PGlite's code (docs/performance.md, "Memory").
    const [{ PGlite }, { pg_trgm }, { btree_gin }, compiled] = await Promise.all([
      import('@electric-sql/pglite'),
      import('@electric-sql/pglite/contrib/pg_trgm'),
      import('@electric-sql/pglite/contrib/btree_gin'),
      pgliteCompiled(),
    ]);
    const pglite = await PGlite.create({ dataDir, parsers: { [INT8_OID]: parseInt8 }, extensions: { pg_trgm, btree_gin }, ...compiled });
    if (config.databaseSchema !== 'public') await pglite.query(`SET search_path TO ${config.databaseSchema}`);
    const oneConnection = new OneConnection();
    const db = new Kysely<Database>({ dialect: oneConnection.dialect({ pglite }), log: count });
    return { db, requestDb: db, embedded: pglite, oneConnection, releaseLock };
  } catch (error) {
    releaseLock();
    throw error;
  }
}

function pgPool(
  connectionString: string,
  schema: string,
  limits: { max: number; connectionTimeoutMillis: number; query_timeout?: number; statementTimeoutMs?: number },
  onError: (error: Error) => void,
): pg.Pool {
  const { statementTimeoutMs, ...poolLimits } = limits;
  const statementTimeout = statementTimeoutMs ? ` -c statement_timeout=${statementTimeoutMs}` : '';
  const pool = new pg.Pool({
    connectionString,
    ...poolLimits,
    options: `-c search_path=${schema}${statementTimeout}`,
    keepAlive: true,
    types: {
      getTypeParser: (oid, format) =>
        oid === INT8_OID
          ? parseInt8
          : oid === TIMESTAMPTZ_OID && format !== 'binary'
            ? parseTimestamptz
            : pg.types.getTypeParser(oid, format),
    },
  } as pg.PoolConfig);
  // An idle connection that breaks emits 'error' on the pool; one that breaks while checked out
  // between statements (inside a transaction) emits it on the client, where pg-pool listens only
  // while it is idle. Unheard, either ends the process. The broken client is not queryable any
  // more: its next statement fails, and the pool discards it on release.
  pool.on('error', onError);
  pool.on('connect', (client) => client.on('error', onError));
  prepareRepeatedStatements(pool);
  return pool;
}

/**
 * LISTEN on a connection of its own (a pooled one would drop it), reconnected when lost. Notices
 * may be missed while it is down, so `onNotice` is called on every loss and every reconnection.
 */
async function listenOnPostgres(url: string, channel: string, onNotice: (payload?: string) => void) {
  let client: pg.Client | undefined;
  let up = false;
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  const lost = () => {
    if (!up && client === undefined) return;
    up = false;
    client = undefined;
    onNotice();
    if (!stopped) retry = setTimeout(() => void connect().catch(lost), 1000);
  };
  const connect = async () => {
    const next = new pg.Client({ connectionString: url });
    client = next;
    next.on('notification', (message) => {
      if (message.channel === channel) onNotice(message.payload);
    });
    next.on('error', lost);
    next.on('end', lost);
    await next.connect();
    await next.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    up = true;
    onNotice();
  };
  await connect();
  return {
    listening: () => up,
    async close() {
      stopped = true;
      clearTimeout(retry);
      const last = client;
      up = false;
      client = undefined;
      await last?.end().catch(() => {});
    },
  };
}
