import { type Compilable, CompiledQuery } from 'kysely';
import type { Db } from './database.ts';

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
    const { rows } = await db.executeQuery<Row>(CompiledQuery.raw(query.sql, parameters));
    return rows;
  };
}
