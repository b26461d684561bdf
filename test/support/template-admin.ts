import type { Config } from '../../src/config.ts';
import type { Db } from '../../src/db/database.ts';
import { bootstrapAdministrator } from '../../src/identity/bootstrap.ts';

/** The first-start Administrator of a template database, which every copy of it shares. */
export interface TemplateAdmin {
  adminKey: string;
  adminId: number;
}

/**
 * Makes a template database's first-start Administrator, as Hopper's first start does, and returns
 * its key for the tests that start from a copy (pglite-template.ts, postgres-template.ts).
 */
export async function bootstrapTemplateAdmin(db: Db, config: Config): Promise<TemplateAdmin> {
  const bootstrap = await bootstrapAdministrator(db, config);
  if (bootstrap.kind !== 'first-start') throw new Error('expected a first start on a fresh template database');
  return { adminKey: bootstrap.key, adminId: bootstrap.userId };
}
