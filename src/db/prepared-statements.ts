import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import pg from 'pg';

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
 * - A statement's columns are asked for (Describe) on its first run only, in the process; later runs
 *   are Bind, Execute, Sync, and their rows are read with the columns and parsers kept from the
 *   first (KnownColumnsQuery). PostgreSQL sends no row description then: parsing it again and
 *   setting up the row's parsers was 8 kB of the 60 kB a read allocated (docs/performance.md).
 *   A statement's result columns cannot change under its name: PostgreSQL refuses to run it
 *   (the error above), and its next name is described anew.
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
  /** The columns of each statement name, from its first run in this process. */
  const columns = new Map<string, Columns>();
  let generation = 0;

  const nameFor = (text: string): string | undefined => {
    let seen = texts.get(text);
    if (!seen) {
      if (texts.size >= MAX_TEXTS) {
        texts.clear();
        columns.clear();
      }
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
      const run = new Promise((resolve, reject) => {
        query(new KnownColumnsQuery({ name, text: config, values }, columns, (error, result) => (error ? reject(error) : resolve(result))));
      });
      return run.catch((error: { code?: string; message?: string }) => {
        if (error?.code !== '0A000' || !/cached plan must not change result type/.test(String(error.message))) throw error;
        generation++;
        return query(config, values);
      });
    };
    (client as unknown as { query: Query }).query = patched;
  });
}

/** pg's row description: a result column (pg-protocol's Field). */
interface Field {
  name: string;
  dataTypeID: number;
  format: string;
}

/** What pg's Result sets up from a row description (pg/lib/result.js, addFields). */
interface Columns {
  fields: Field[];
  parsers: unknown[] | undefined;
  emptyRow: object | null;
}

/** The parts of pg's Query, Result and Connection that KnownColumnsQuery uses (pg/lib/query.js, 8.x). */
interface PgResult {
  fields: Field[];
  _parsers: unknown[] | undefined;
  _prebuiltEmptyResultObject: object | null;
}
interface PgConnection {
  submittedNamedStatements: Record<string, string>;
  parse(message: { text: string; name: string; types: unknown }): void;
  bind(message: { portal: string; statement: string; values: unknown[]; binary: boolean; valueMapper: undefined }): void;
  sync(): void;
}
interface PgQuery {
  name: string;
  text: string;
  values: unknown[];
  types: unknown;
  portal: string;
  binary: boolean;
  rows: number | undefined;
  _result: PgResult;
  _accumulateRows: boolean;
  submit(connection: PgConnection): Error | null;
  hasBeenParsed(connection: PgConnection): boolean;
  handleError(error: unknown, connection: PgConnection): void;
  handleRowDescription(message: { fields: Field[] }): void;
  prepare(connection: PgConnection): void;
  _getRows(connection: PgConnection, rows: number | undefined): void;
}
type Callback = (error: Error | null, result: unknown) => void;
const PgQuery = pg.Query as unknown as new (config: { name: string; text: string; values: unknown[] }, callback: Callback) => PgQuery;
/** How pg writes a parameter (what its own Query binds with). */
const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue: (value: unknown) => unknown };

/**
 * pg's Query for a named statement, but for its Describe: once the statement's columns are known
 * (from a run that described them), a run sends Parse (on a connection that has not yet), Bind,
 * Execute and Sync, and its rows are read with the known columns — pg's own `prepare` without the
 * `describe`.
 *
 * Its values are made ready to send (pg's `prepareValue`) before anything is sent: one that
 * cannot be (a circular object) fails the query with nothing on the wire. pg's own Query meets
 * such a value only while writing Bind, after Parse; it then closes the statement it has just
 * parsed but still counts it as parsed on the connection, whose every later run of the statement
 * failed with "prepared statement … does not exist".
 */
class KnownColumnsQuery extends PgQuery {
  readonly #known: Map<string, Columns>;

  constructor(config: { name: string; text: string; values: unknown[] }, known: Map<string, Columns>, callback: Callback) {
    super(config, callback);
    this.#known = known;
  }

  override submit(connection: PgConnection): Error | null {
    const values = this.values;
    if (values) {
      const ready = new Array<unknown>(values.length);
      try {
        for (let i = 0; i < values.length; i++) ready[i] = prepareValue(values[i]);
      } catch (error) {
        // pg answers the query with it, having sent nothing.
        return error as Error;
      }
      this.values = ready;
    }
    return super.submit(connection);
  }

  override handleRowDescription(message: { fields: Field[] }): void {
    super.handleRowDescription(message);
    if (!this.#known.has(this.name)) {
      const result = this._result;
      this.#known.set(this.name, { fields: result.fields, parsers: result._parsers, emptyRow: result._prebuiltEmptyResultObject });
    }
  }

  override prepare(connection: PgConnection): void {
    const known = this.#known.get(this.name);
    if (!known) {
      super.prepare(connection);
      return;
    }
    if (!this.hasBeenParsed(connection)) {
      connection.parse({ text: this.text, name: this.name, types: this.types });
      connection.submittedNamedStatements[this.name] = this.text;
    }
    try {
      // The values are ready to send (submit).
      connection.bind({ portal: this.portal, statement: this.name, values: this.values, binary: this.binary, valueMapper: undefined });
    } catch (error) {
      connection.sync();
      this.handleError(error, connection);
      return;
    }
    const result = this._result;
    result.fields = known.fields;
    result._parsers = known.parsers;
    result._prebuiltEmptyResultObject = known.emptyRow;
    this._accumulateRows = true;
    this._getRows(connection, this.rows);
  }
}
