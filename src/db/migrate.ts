import { type Kysely, sql } from 'kysely';
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
import * as emailIdentityInbound from './migrations/0010-email-identity-inbound.ts';
import * as textSearch from './migrations/0011-text-search.ts';
import * as skippedDeliveries from './migrations/0012-skipped-deliveries.ts';
import * as webhooks from './migrations/0013-webhooks.ts';
import * as contactMatchIndexes from './migrations/0014-contact-match-indexes.ts';
import * as voicemailProviderState from './migrations/0015-voicemail-provider-state.ts';
import * as contactWebhooksPerStatement from './migrations/0016-contact-webhooks-per-statement.ts';
import * as webhookWakeups from './migrations/0017-webhook-wakeups.ts';
import * as deliveryAddresses from './migrations/0018-delivery-addresses.ts';
import * as providerReceipts from './migrations/0019-provider-receipts.ts';
import * as textSearchShortPendingList from './migrations/0020-text-search-short-pending-list.ts';
import * as contactEmailUnique from './migrations/0021-contact-email-unique.ts';
import * as apiKeyMinter from './migrations/0022-api-key-minter.ts';
import * as outcomesAndSuppressions from './migrations/0023-outcomes-and-suppressions.ts';
import * as softBounceIndex from './migrations/0024-soft-bounce-index.ts';
import * as replyAuthentication from './migrations/0026-reply-authentication.ts';
import * as providerRequestBodies from './migrations/0027-provider-request-bodies.ts';
import * as webhookPauses from './migrations/0029-webhook-pauses.ts';
import * as teamWebhooks from './migrations/0030-team-webhooks.ts';
import * as contactExternalIds from './migrations/0031-contact-external-ids.ts';
import * as messageCorrelation from './migrations/0032-message-correlation.ts';
import * as mediaBlobs from './migrations/0034-media-blobs.ts';
import * as inlinableWebhookEndpoints from './migrations/0035-inlinable-webhook-endpoints.ts';
import * as statusCounts from './migrations/0036-status-counts.ts';
import * as schemaChannels from './migrations/0037-schema-channels.ts';
import * as webhookMakerRights from './migrations/0038-webhook-maker-rights.ts';
import * as emailOptOuts from './migrations/0039-email-opt-outs.ts';
import * as webhookResendAllowances from './migrations/0040-webhook-resend-allowances.ts';
import * as sendingPauses from './migrations/0041-sending-pauses.ts';
import * as webSessionFlash from './migrations/0042-web-session-flash.ts';
import * as userInvitations from './migrations/0043-user-invitations.ts';
import * as heldReplyDecisions from './migrations/0044-held-reply-decisions.ts';
import * as contactImports from './migrations/0045-contact-imports.ts';

/** Every migration, in order. Names sort in the order they must run; never rename one. */
export const MIGRATIONS: Record<string, Migration> = {
  '0001-identity': identity,
  '0002-web-sessions': webSessions,
  '0003-contacts': contacts,
  '0004-media': media,
  '0005-messages': messages,
  '0006-deliveries': deliveries,
  '0007-secrets': secrets,
  '0008-delivery-provider-ids': deliveryProviderIds,
  '0009-collection-versions': collectionVersions,
  '0010-email-identity-inbound': emailIdentityInbound,
  '0011-text-search': textSearch,
  '0012-skipped-deliveries': skippedDeliveries,
  '0013-webhooks': webhooks,
  '0014-contact-match-indexes': contactMatchIndexes,
  '0015-voicemail-provider-state': voicemailProviderState,
  '0016-contact-webhooks-per-statement': contactWebhooksPerStatement,
  '0017-webhook-wakeups': webhookWakeups,
  '0018-delivery-addresses': deliveryAddresses,
  '0019-provider-receipts': providerReceipts,
  '0020-text-search-short-pending-list': textSearchShortPendingList,
  '0021-contact-email-unique': contactEmailUnique,
  '0022-api-key-minter': apiKeyMinter,
  '0023-outcomes-and-suppressions': outcomesAndSuppressions,
  '0024-soft-bounce-index': softBounceIndex,
  '0026-reply-authentication': replyAuthentication,
  '0027-provider-request-bodies': providerRequestBodies,
  '0029-webhook-pauses': webhookPauses,
  '0030-team-webhooks': teamWebhooks,
  '0031-contact-external-ids': contactExternalIds,
  '0032-message-correlation': messageCorrelation,
  '0034-media-blobs': mediaBlobs,
  '0035-inlinable-webhook-endpoints': inlinableWebhookEndpoints,
  '0036-status-counts': statusCounts,
  '0037-schema-channels': schemaChannels,
  '0038-webhook-maker-rights': webhookMakerRights,
  '0039-email-opt-outs': emailOptOuts,
  '0040-webhook-resend-allowances': webhookResendAllowances,
  '0041-sending-pauses': sendingPauses,
  '0042-web-session-flash': webSessionFlash,
  '0043-user-invitations': userInvitations,
  '0044-held-reply-decisions': heldReplyDecisions,
  '0045-contact-imports': contactImports,
};

/**
 * Brings the schema up to date. Kysely's migrator takes a database lock, so several processes
 * starting at once on one PostgreSQL run each migration exactly once; running it again is a no-op.
 */
export async function migrateToLatest(db: Kysely<unknown>, schema: string): Promise<string[]> {
  if (await atLatest(db, schema)) return [];
  return migrateTo(db, schema);
}

/**
 * Runs the migrations up to `target` (all, when absent) in `schema`: migrateToLatest's, and the
 * tests' of a migration on data made by the ones before it.
 */
export async function migrateTo(db: Kysely<unknown>, schema: string, target?: string): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => MIGRATIONS },
    migrationTableSchema: schema,
  });
  for (let attempt = 1; ; attempt++) {
    const { error, results } = await (target ? migrator.migrateTo(target) : migrator.migrateToLatest());
    if (!error) return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    // Kysely's table check reads the catalog of every schema in the database: a schema another
    // session drops meanwhile fails it in assorted ways (3F000 "schema … does not exist", XX000
    // "cache lookup failed", 42P01 or 42703 about one of that schema's tables — several test files
    // share one PostgreSQL database). Without results, nothing has run (the checks and the lock
    // come first, and pending migrations run in one transaction): try again.
    if (attempt < 10 && results === undefined) {
      await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
      continue;
    }
    throw error;
  }
}

/**
 * One query instead of the migrator's table checks and lock: true when the last migration this
 * version knows has run (and so, names sorting in run order, every one before it).
 */
async function atLatest(db: Kysely<unknown>, schema: string): Promise<boolean> {
  const last = Object.keys(MIGRATIONS).sort().at(-1);
  try {
    const { rows } = await sql<{ name: string }>`
      SELECT name FROM ${sql.table(`${schema}.kysely_migration`)} WHERE name = ${last}`.execute(db);
    return rows.length === 1;
  } catch {
    return false; // no migration table yet
  }
}
