import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PGliteDialect, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Config } from '../config.ts';
import { migrateToLatest } from './migrate.ts';
import { acquirePgliteLock } from './pglite-lock.ts';
import { prepareRepeatedStatements } from './prepared-statements.ts';
import type { Database } from './schema.ts';

export type Db = Kysely<Database>;

export interface DatabaseHandle {
  readonly db: Db;
  readonly kind: 'pglite' | 'postgres';
  /** The embedded database itself, when there is one (the job queue runs on it too). */
  readonly pglite: PGlite | undefined;
  /** Number of SQL statements run so far: lets tests prove a request never reached the database. */
  queryCount(): number;
  /** True when the database answers a trivial query. */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

const INT8_OID = 20;
// Ids are bigint in SQL and safe integers in JSON: ids never approach 2^53.
const parseInt8 = (value: string) => Number(value);

/** Opens PGlite in DATA_DIR/pgdata, or PostgreSQL when DATABASE_URL is set, and migrates it. */
export async function openDatabase(config: Config): Promise<DatabaseHandle> {
  let queries = 0;
  const log = () => {
    queries++;
  };
  const schema = config.databaseSchema;
  let releaseLock = () => {};
  let db: Db;
  let embedded: PGlite | undefined;

  if (config.databaseUrl) {
    const pool = new pg.Pool({
      connectionString: config.databaseUrl,
      max: 20,
      options: `-c search_path=${schema}`,
      types: { getTypeParser: (oid, format) => (oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format)) },
    } as pg.PoolConfig);
    prepareRepeatedStatements(pool);
    db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), log });
  } else {
    const dataDir = join(config.dataDir, 'pgdata');
    releaseLock = acquirePgliteLock(`${dataDir}.lock`);
    try {
      const pglite = await PGlite.create({ dataDir, parsers: { [INT8_OID]: parseInt8 } });
      if (schema !== 'public') await pglite.query(`SET search_path TO ${schema}`);
      embedded = pglite;
      db = new Kysely<Database>({ dialect: new PGliteDialect({ pglite }), log });
    } catch (error) {
      releaseLock();
      throw error;
    }
  }

  try {
    await sql`CREATE SCHEMA IF NOT EXISTS ${sql.id(schema)}`.execute(db);
    await migrateToLatest(db as unknown as Kysely<unknown>, schema);
  } catch (error) {
    await db.destroy();
    releaseLock();
    throw error;
  }

  let closed = false;
  return {
    db,
    kind: config.databaseUrl ? 'postgres' : 'pglite',
    pglite: embedded,
    queryCount: () => queries,
    async ping() {
      try {
        await sql`SELECT 1`.execute(db);
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await db.destroy();
      releaseLock();
    },
  };
}
