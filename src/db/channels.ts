import { createHash } from 'node:crypto';
import { type RawBuilder, sql } from 'kysely';

/**
 * The NOTIFY channels of Hopper's processes. PostgreSQL delivers a notice to every session
 * listening on its channel in the whole database, whatever its schema; so each channel is scoped to
 * one installation's schema (DATABASE_SCHEMA): the base name, `_`, and the first 16 hex digits of
 * the MD5 of the schema's name (a channel name is at most 63 bytes, a schema's name too). Without
 * it, every installation sharing a database — staging beside production, or the test files of one
 * CI run — forgot its cached principals at another's writes and waited for the others' processes
 * at each of its own (http/authenticate.ts). Migration 0037's triggers write the same rule in SQL.
 */
export type Channel = 'hopper_principals' | 'hopper_webhooks';

/** The channel's name for the processes of `schema`: what they LISTEN on. */
export function channelName(base: Channel, schema: string): string {
  return `${base}_${createHash('md5').update(schema).digest('hex').slice(0, 16)}`;
}

/** The same name inside a statement of this installation (its session's search path names the schema). */
export function channelOfSession(base: Channel): RawBuilder<string> {
  return sql<string>`(${base} || '_' || left(md5(current_schema()), 16))`;
}
