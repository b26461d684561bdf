import type { Kysely } from 'kysely';
import { type Migration, Migrator } from 'kysely/migration';
import * as identity from './migrations/0001-identity.ts';
import * as webSessions from './migrations/0002-web-sessions.ts';
import * as contacts from './migrations/0003-contacts.ts';
import * as media from './migrations/0004-media.ts';
import * as messages from './migrations/0005-messages.ts';
import * as deliveries from './migrations/0006-deliveries.ts';
import * as secrets from './migrations/0007-secrets.ts';
import * as deliveryProviderIds from './migrations/0008-delivery-provider-ids.ts';
import * as collectionVersions from './migrations/0009-collection-versions.ts';

/** Every migration, in order. Names sort in the order they must run; never rename one. */
const MIGRATIONS: Record<string, Migration> = {
  '0001-identity': identity,
  '0002-web-sessions': webSessions,
  '0003-contacts': contacts,
  '0004-media': media,
  '0005-messages': messages,
  '0006-deliveries': deliveries,
  '0007-secrets': secrets,
  '0008-delivery-provider-ids': deliveryProviderIds,
  '0009-collection-versions': collectionVersions,
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
