import type { Kysely } from 'kysely';
import { type Migration, Migrator } from 'kysely/migration';
import * as identity from './migrations/0001-identity.ts';

/** Every migration, in order. Names sort in the order they must run; never rename one. */
const MIGRATIONS: Record<string, Migration> = {
  '0001-identity': identity,
};

/**
 * Brings the schema up to date. Kysely's migrator takes a database lock, so several processes
 * starting at once on one PostgreSQL run each migration exactly once; running it again is a no-op.
 */
export async function migrateToLatest(db: Kysely<unknown>, schema: string): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => MIGRATIONS },
    migrationTableSchema: schema,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
