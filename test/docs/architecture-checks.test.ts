import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { rawClockReads } from '../../scripts/check-clock.ts';
import { unusedExports } from '../../scripts/check-exports.ts';
import { longFunctions, MAX_LINES } from '../../scripts/check-functions.ts';
import { checkLayers, parseLayers } from '../../scripts/check-layers.ts';
import { checkOwners } from '../../scripts/check-owners.ts';

describe('the layer check (npm run check:layers)', () => {
  test('src/ keeps to the layers of docs/architecture.md', async () => {
    assert.deepEqual(await checkLayers(), []);
  });

  test('reads one layer per line at the margin, names before two spaces, indented lines as description', () => {
    const { rank } = parseLayers('# A\n\n## Layers\n\n```\napp.ts web/   top\n               more words\nhttp/          below\n```\n');
    assert.deepEqual(
      [...rank],
      [
        ['app.ts', 0],
        ['web/', 0],
        ['http/', 1],
      ],
    );
  });

  test('an import that climbs a layer, a module in no layer and a name src/ lacks are each reported', async () => {
    const root = await mkdtemp(join(tmpdir(), 'hopper-layers-'));
    try {
      await mkdir(join(root, 'docs'));
      await mkdir(join(root, 'src/http'), { recursive: true });
      await mkdir(join(root, 'src/db'));
      await mkdir(join(root, 'src/extra'));
      await writeFile(
        join(root, 'docs/architecture.md'),
        '## Layers\n\n```\nhttp/    routes\ndb/      the database\ngone.ts  not there\n```\n',
      );
      await writeFile(join(root, 'src/http/routes.ts'), "import { db } from '../db/database.ts';\nexport const routes = db;\n");
      await writeFile(
        join(root, 'src/db/database.ts'),
        "import type { App } from '../http/routes.ts';\nexport const db = 1 as unknown as App;\n",
      );
      await writeFile(join(root, 'src/extra/thing.ts'), 'export const thing = 1;\n');
      const problems = await checkLayers(root);
      assert.equal(problems.length, 3, problems.join('\n'));
      assert.match(problems.join('\n'), /src\/extra\/ is in no layer/);
      assert.match(problems.join('\n'), /places gone\.ts, which src\/ does not have/);
      assert.match(
        problems.join('\n'),
        /src\/db\/database\.ts imports \.\.\/http\/routes\.ts: db\/ .* may not import from http\/, a layer above it/,
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('the table owners check (npm run check:owners)', () => {
  test("src/ keeps every statement in its table's module", async () => {
    assert.deepEqual(await checkOwners(), []);
  });

  test('a write or a read of a table outside its module, a table not listed or named unreadably, and a missing module are each reported', async () => {
    const root = await mkdtemp(join(tmpdir(), 'hopper-owners-'));
    try {
      await mkdir(join(root, 'docs'));
      await mkdir(join(root, 'src/contacts'), { recursive: true });
      await mkdir(join(root, 'src/sending'));
      // The planted code is typed with Kysely, as src/ is: the check reads tables by their types.
      await symlink(join(import.meta.dirname, '../../node_modules'), join(root, 'node_modules'));
      await writeFile(
        join(root, 'docs/architecture.md'),
        '## Tables\n\n```\ncontacts      contacts/contacts.ts\nmedia         contacts/contacts.ts\ntags          contacts/tags.ts\n```\n',
      );
      await writeFile(
        join(root, 'src/contacts/contacts.ts'),
        ["import type { Kysely } from 'kysely';", "export const q = (db: Kysely<any>) => db.selectFrom('contacts').selectAll();"].join(
          '\n',
        ),
      );
      await writeFile(
        join(root, 'src/sending/send.ts'),
        [
          "import { type Kysely, sql } from 'kysely';",
          "export const a = (db: Kysely<any>) => db.updateTable('contacts').set({ status: 'x' });",
          "export const b = (db: Kysely<any>) => db.transaction().execute((trx) => trx\n  .selectFrom('contacts')\n  .selectAll().execute());",
          // A join, or a sub-select of another table inside a statement of this module, is fine.
          "export const c = (db: Kysely<any>) => db.selectFrom('deliveries as d').innerJoin('contacts as c', 'c.id', 'd.contact_id').where((eb) => eb.exists(eb.selectFrom('contacts').select('id')));",
          'export const d = sql`INSERT INTO deliveries (id) VALUES (1)`;',
          // Raw SQL reads: the table of the top-level FROM is the statement's; a FROM naming a WITH query reads no table.
          'export const e = sql`SELECT d.id FROM deliveries d JOIN contacts c ON c.id = d.contact_id WHERE EXISTS (SELECT 1 FROM contacts)`;',
          'export const f = sql`WITH x AS (SELECT 1) SELECT * FROM x UNION ALL SELECT id FROM contacts WHERE true`;',
          // A table named by a variable is every table its type allows; a mere string cannot be placed.
          // biome-ignore lint/suspicious/noTemplateCurlyInString: planted code, as text
          "export const g = (table: 'contacts' | 'media') => sql`SELECT r.* FROM ${sql.table(table)} r`;",
          'export const h = (db: Kysely<any>, table: string) => db.deleteFrom(table);',
        ].join('\n'),
      );
      const problems = (await checkOwners(root)).join('\n');
      const expected = [
        /names src\/contacts\/tags\.ts, which does not exist/,
        /src\/sending\/send\.ts:2 writes contacts, whose statements belong in src\/contacts\/contacts\.ts/,
        /src\/sending\/send\.ts:3 reads contacts, whose statements belong in src\/contacts\/contacts\.ts/,
        /src\/sending\/send\.ts:6 reads deliveries, a table .* does not list/,
        /src\/sending\/send\.ts:7 writes deliveries, a table .* does not list/,
        /src\/sending\/send\.ts:8 reads deliveries, a table .* does not list/,
        /src\/sending\/send\.ts:9 reads contacts, whose statements belong in src\/contacts\/contacts\.ts/,
        /src\/sending\/send\.ts:10 reads contacts, whose statements belong in src\/contacts\/contacts\.ts/,
        /src\/sending\/send\.ts:10 reads media, whose statements belong in src\/contacts\/contacts\.ts/,
        /src\/sending\/send\.ts:11 writes a table named by `table`, which the check cannot read/,
      ];
      for (const pattern of expected) assert.match(problems, pattern);
      assert.equal(problems.split('\n').length, expected.length, problems);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('the exports check (npm run check:exports)', () => {
  test('every export of src/ is imported somewhere', async () => {
    assert.deepEqual(await unusedExports(), []);
  });
});

/** A fresh root with `files` (path under it → text), for a check to read; removed afterwards. */
async function plantedRoot(prefix: string, files: Record<string, string>, check: (root: string) => Promise<void>): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), prefix));
  try {
    for (const [path, text] of Object.entries(files)) {
      await mkdir(join(root, path, '..'), { recursive: true });
      await writeFile(join(root, path), text);
    }
    await check(root);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

describe('the clock check (npm run check:clock)', () => {
  test("src/ reads the system's clock in src/time.ts only", async () => {
    assert.deepEqual(await rawClockReads(), []);
  });

  test('Date.now, new Date() and Date() elsewhere are each reported; a Date made from a value and a duration measured are not', async () => {
    await plantedRoot(
      'hopper-clock-',
      {
        'src/time.ts': 'export const realTimeMs = () => Date.now();\n',
        'src/sending/planted.ts': [
          'export const a = Date.now();',
          'export const b = new Date();',
          'export const c = Date();',
          'export const d = [1].map(Date.now);',
          "export const e = new Date('2030-01-01T00:00:00Z');",
          'export const f = performance.now();',
        ].join('\n'),
      },
      async (root) => {
        assert.deepEqual(await rawClockReads(root), [
          'src/sending/planted.ts:1 Date.now',
          'src/sending/planted.ts:2 new Date()',
          'src/sending/planted.ts:3 Date()',
          'src/sending/planted.ts:4 Date.now',
        ]);
      },
    );
  });
});

describe('the function length check (npm run check:functions)', () => {
  test(`no function of src/ is over ${MAX_LINES} lines`, async () => {
    assert.deepEqual(await longFunctions(), []);
  });

  test('a function one line over is reported, with the functions it holds counted in; one at the limit and a migration are not', async () => {
    const body = (lines: number) => Array.from({ length: lines - 2 }, (_, i) => `  const x${i} = ${i};`).join('\n');
    await plantedRoot(
      'hopper-functions-',
      {
        'src/http/planted.ts': [
          `export function atTheLimit() {\n${body(MAX_LINES)}\n}`,
          `export const tooLong = () => {\n  const inner = () => 1;\n${body(MAX_LINES)}\n};`,
        ].join('\n'),
        'src/db/migrations/0001-planted.ts': `export async function up() {\n${body(MAX_LINES * 2)}\n}\n`,
      },
      async (root) => {
        assert.deepEqual(await longFunctions(root), [`src/http/planted.ts:${MAX_LINES + 1} tooLong (${MAX_LINES + 1} lines)`]);
      },
    );
  });
});
