import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { prepareRepeatedStatements } from '../../src/db/prepared-statements.ts';

/**
 * Repeated statements run as prepared statements whose columns are described once per process
 * (db/prepared-statements.ts): later runs send no Describe, so PostgreSQL sends no row
 * description, and their rows are read with the columns kept from the first. Counted here on the
 * wire: every row description a connection receives. PostgreSQL only (PGlite has no pool).
 */
describe('prepared statements, described once', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, () => {
  const schema = `prepared_${randomBytes(4).toString('hex')}`;
  let pool: pg.Pool;
  let descriptions = 0;

  before(async () => {
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE SCHEMA ${schema}`);
    await admin.query(`CREATE TABLE ${schema}.t (id bigint PRIMARY KEY, name text, at timestamptz, doc jsonb, n int)`);
    await admin.query(
      `INSERT INTO ${schema}.t SELECT g, 'row ' || g, timestamptz '2026-01-01' + g * interval '1 hour', jsonb_build_object('g', g), NULL FROM generate_series(1, 50) g`,
    );
    await admin.end();
    pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 3, options: `-c search_path=${schema}` });
    pool.on('connect', (client) => {
      (client as unknown as { connection: { on(event: string, listener: () => void): void } }).connection.on('rowDescription', () => {
        descriptions++;
      });
    });
    prepareRepeatedStatements(pool);
  });

  after(async () => {
    await pool.end();
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
  });

  /** As Kysely runs a statement: a connection of the pool, text and parameters, the connection given back. */
  async function run(text: string, values: unknown[]) {
    const client = await pool.connect();
    try {
      return await client.query(text, values);
    } finally {
      client.release();
    }
  }

  test('a repeated statement is described on its first prepared run only, on every connection, and reads the same rows', async () => {
    const text = 'SELECT id, name, at, doc, n FROM t WHERE id = $1 OR id = $2 ORDER BY id';
    const expected = (await run(text, [3, 4])).rows; // the first use: run unprepared, described
    assert.deepEqual(expected, [
      { id: '3', name: 'row 3', at: new Date('2026-01-01T03:00:00Z'), doc: { g: 3 }, n: null },
      { id: '4', name: 'row 4', at: new Date('2026-01-01T04:00:00Z'), doc: { g: 4 }, n: null },
    ]);
    let before = descriptions;
    await run(text, [3, 4]); // the second: prepared, and described
    assert.equal(descriptions - before, 1);
    before = descriptions;
    // Thirty runs at once: each of the pool's three connections prepares the statement, none describes it.
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => run(text, [i + 1, i + 2])));
    assert.equal(descriptions - before, 0, 'no row description for thirty runs');
    for (const [i, result] of results.entries()) {
      assert.deepEqual(result.rows, [
        { id: String(i + 1), name: `row ${i + 1}`, at: new Date(Date.UTC(2026, 0, 1, i + 1)), doc: { g: i + 1 }, n: null },
        { id: String(i + 2), name: `row ${i + 2}`, at: new Date(Date.UTC(2026, 0, 1, i + 2)), doc: { g: i + 2 }, n: null },
      ]);
      assert.deepEqual(
        result.fields.map((field) => field.name),
        ['id', 'name', 'at', 'doc', 'n'],
      );
    }
    // Each row is an object of its own.
    (results[0]?.rows[1] as { name: string }).name = 'changed';
    assert.equal(results[1]?.rows[0]?.name, 'row 2');
  });

  test('a statement whose columns changed under it is described again', async () => {
    const text = 'SELECT * FROM t WHERE id = $1';
    for (let i = 0; i < 4; i++) assert.deepEqual(Object.keys((await run(text, [7])).rows[0]), ['id', 'name', 'at', 'doc', 'n']);
    await run('ALTER TABLE t ADD COLUMN extra text DEFAULT $$more$$', []);
    // Every connection that had it prepared refuses it once ("cached plan must not change result
    // type"); it then runs under a new name, described anew.
    for (let i = 0; i < 6; i++) {
      const { rows } = await run(text, [7]);
      assert.deepEqual(Object.keys(rows[0]), ['id', 'name', 'at', 'doc', 'n', 'extra']);
      assert.equal(rows[0].extra, 'more');
    }
  });

  test('statements without rows, and a value that cannot be sent, leave the connection usable', async () => {
    for (let i = 0; i < 5; i++) {
      const result = await run('UPDATE t SET n = $1 WHERE id = $2', [i, 10]);
      assert.equal(result.rowCount, 1);
    }
    assert.equal((await run('SELECT n FROM t WHERE id = $1', [10])).rows[0].n, 4);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const text = 'SELECT doc FROM t WHERE doc = $1';
    await run(text, [{ g: 1 }]);
    await run(text, [{ g: 1 }]);
    await assert.rejects(run(text, [circular]), /circular/i);
    assert.deepEqual((await run(text, [{ g: 1 }])).rows, [{ doc: { g: 1 } }]);
  });
});
