import { type Kysely, sql } from 'kysely';

// NOTIFY channels scoped to the installation's schema (db/channels.ts): PostgreSQL hands a notice
// to every listener of its channel in the database, so installations sharing one database (each in
// a schema of its own) forgot each other's cached principals and woke each other's webhook workers.
// The channel is the base name, `_`, and the first 16 hex digits of md5(schema) — the table's own
// schema here, whatever the writing session's search path.
//
// A change of principal is also still announced on the unscoped channel, for processes of an
// earlier version during a rolling upgrade: they listen there, and must not keep a revoked key.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION notify_principals_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('hopper_principals_' || left(md5(TG_TABLE_SCHEMA), 16), TG_TABLE_NAME);
      PERFORM pg_notify('hopper_principals', TG_TABLE_NAME);
      RETURN NULL;
    END
    $$`.execute(db);
  await sql`
    CREATE OR REPLACE FUNCTION webhook_wake() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('hopper_webhooks_' || left(md5(TG_TABLE_SCHEMA), 16), '');
      RETURN NULL;
    END
    $$`.execute(db);
}
