import { createHash } from 'node:crypto';
import type pg from 'pg';

/**
 * Runs the statements an application repeats as named (prepared) statements, so PostgreSQL parses
 * and plans each once per connection instead of on every execution. For the short queries of an
 * API request that is most of the database's work: reading a voicemail drop costs about 0.5 ms of
 * parsing and planning and 0.05 ms of execution (bench/api.ts).
 *
 * - Only SELECT/INSERT/UPDATE/DELETE/WITH statements sent with parameters (what Kysely sends),
 *   and none with a LIMIT. After a few runs PostgreSQL may plan a prepared statement once for any
 *   parameters ("generic plan"); for `WHERE user_id = $1 … ORDER BY id LIMIT 15` that plan can walk
 *   the primary key of the whole table, fine for a user who owns a tenth of it and 0.3 s for one
 *   who owns nothing. Pages stay planned for their own parameters.
 * - A text is prepared from its second use on, so one-off texts (a search with an unusual mix of
 *   filters) never take a slot; at most MAX_PER_CONNECTION statements per connection.
 * - After a schema change made while this process runs (a newer version's migration), PostgreSQL
 *   refuses a prepared statement whose result columns changed ("cached plan must not change
 *   result type"). The statement is then run unprepared, and every text gets a new name.
 *
 * Not for a pooler in transaction mode that cannot carry prepared statements (PgBouncer before
 * 1.21 or without max_prepared_statements).
 */
const MAX_PER_CONNECTION = 200;
const MAX_TEXTS = 5000;
const PREPARABLE = /^\s*(select|insert|update|delete|with)\b/i;
const LIMITED = /\blimit\b/i;

interface Seen {
  uses: number;
  name: string;
}

type Query = (config: unknown, values?: unknown, callback?: unknown) => unknown;

export function prepareRepeatedStatements(pool: pg.Pool): void {
  const texts = new Map<string, Seen>();
  let generation = 0;

  const nameFor = (text: string): string | undefined => {
    let seen = texts.get(text);
    if (!seen) {
      if (texts.size >= MAX_TEXTS) texts.clear();
      seen = { uses: 0, name: `h${createHash('sha1').update(text).digest('hex').slice(0, 20)}` };
      texts.set(text, seen);
    }
    seen.uses++;
    return seen.uses >= 2 ? `${seen.name}_${generation}` : undefined;
  };

  pool.on('connect', (client) => {
    const query = client.query.bind(client) as Query;
    const prepared = new Set<string>();
    const patched: Query = (config, values, callback) => {
      if (
        typeof config !== 'string' ||
        !Array.isArray(values) ||
        values.length === 0 ||
        callback !== undefined ||
        !PREPARABLE.test(config) ||
        LIMITED.test(config)
      ) {
        return query(config, values, callback);
      }
      const name = nameFor(config);
      if (!name || (!prepared.has(name) && prepared.size >= MAX_PER_CONNECTION)) return query(config, values);
      prepared.add(name);
      return (query({ name, text: config, values }) as Promise<unknown>).catch((error: { code?: string; message?: string }) => {
        if (error?.code !== '0A000' || !/cached plan must not change result type/.test(String(error.message))) throw error;
        generation++;
        return query(config, values);
      });
    };
    (client as unknown as { query: Query }).query = patched;
  });
}
