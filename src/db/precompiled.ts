import { type Compilable, CompiledQuery } from 'kysely';
import { type Db, directRunner } from './database.ts';

/**
 * A query built and compiled once per database handle, then run with new values: for the queries
 * of every request (the API key look-up, a message read), where building and compiling a Kysely
 * query costs more than PostgreSQL needs to run its prepared statement. `build` gets one
 * placeholder per value and puts them where the values go; the SQL text stays the same, so the
 * statement is also prepared once per connection (prepared-statements.ts).
 */
export function precompiled<Values extends unknown[], Row>(
  arity: Values['length'],
  // biome-ignore lint/suspicious/noExplicitAny: placeholders stand in for values of any column type
  build: (db: Db, ...placeholders: any[]) => Compilable<Row>,
): (db: Db, ...values: Values) => Promise<Row[]> {
  const placeholders = Array.from({ length: arity }, (_, index) => Symbol(`value ${index}`));
  const compiled = new WeakMap<Db, CompiledQuery<Row>>();
  return async (db, ...values) => {
    let query = compiled.get(db);
    if (!query) {
      query = build(db, ...placeholders).compile();
      if (placeholders.some((placeholder) => !query?.parameters.includes(placeholder))) {
        throw new Error('precompiled: every placeholder must become a parameter of the query');
      }
      compiled.set(db, query);
    }
    const parameters = query.parameters.map((parameter) => {
      const index = placeholders.indexOf(parameter as symbol);
      return index < 0 ? parameter : values[index];
    });
    return await run<Row>(db, query.sql, parameters);
  };
}

/**
 * An `INSERT … RETURNING *` into one table, compiled once per set of columns given (and database
 * handle), then run with new values: for the inserts of every create, whose Kysely build and
 * compile allocated about a fifth of a drop create (docs/performance.md, "Creates"). Columns
 * whose value is undefined are left out, as Kysely leaves them out. At most MAX_SHAPES column
 * sets are kept per table and handle; a create's optional fields make a few dozen at most.
 */
export function precompiledInsert<Row>(
  build: (db: Db, values: Record<string, unknown>) => Compilable<Row>,
): (db: Db, values: object) => Promise<Row> {
  const statement = precompiledByShape(build);
  return async (db, values) => {
    const [row] = await statement(db, values);
    if (!row) throw new Error('precompiledInsert: the insert returned no row');
    return row;
  };
}

/**
 * A statement built from a record of values, compiled once per set of keys given (and database
 * handle), then run with new values; its rows returned. `precompiledInsert` is one; so is an
 * insert whose values are a sub-select's (message-tables.ts, insertDropPlaying).
 */
export function precompiledByShape<Row>(
  build: (db: Db, values: Record<string, unknown>) => Compilable<Row>,
): (db: Db, values: object) => Promise<Row[]> {
  const shapes = new WeakMap<Db, Map<string, { query: CompiledQuery<Row>; columns: number[] }>>();
  return async (db, values) => {
    const columns = Object.keys(values).filter((column) => (values as Record<string, unknown>)[column] !== undefined);
    const shape = columns.join(',');
    let known = shapes.get(db);
    if (!known) {
      known = new Map();
      shapes.set(db, known);
    }
    let compiled = known.get(shape);
    if (!compiled) {
      const placeholders = columns.map((column) => Symbol(column));
      const query = build(db, Object.fromEntries(columns.map((column, index) => [column, placeholders[index]]))).compile();
      const order = query.parameters.map((parameter) => placeholders.indexOf(parameter as symbol));
      if (order.includes(-1) || order.length !== columns.length) {
        throw new Error('precompiledByShape: every value must become one parameter of the statement');
      }
      compiled = { query, columns: order };
      if (known.size >= MAX_SHAPES) known.clear();
      known.set(shape, compiled);
    }
    const parameters = compiled.columns.map((index) => (values as Record<string, unknown>)[columns[index] as string]);
    return await run<Row>(db, compiled.query.sql, parameters);
  };
}

const MAX_SHAPES = 64;

/** A compiled statement run on the handle's pool when it can be (database.ts, directRunner), else through Kysely. */
async function run<Row>(db: Db, text: string, parameters: readonly unknown[]): Promise<Row[]> {
  const direct = directRunner(db);
  if (direct) return await direct<Row>(text, parameters);
  return (await db.executeQuery<Row>(CompiledQuery.raw(text, parameters as unknown[]))).rows;
}
