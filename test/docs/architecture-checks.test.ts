import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { unusedExports } from '../../scripts/check-exports.ts';
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

  test('a write or a read of a table outside its module, a table not listed and a missing module are each reported', async () => {
    const root = await mkdtemp(join(tmpdir(), 'hopper-owners-'));
    try {
      await mkdir(join(root, 'docs'));
      await mkdir(join(root, 'src/contacts'), { recursive: true });
      await mkdir(join(root, 'src/sending'));
      await writeFile(
        join(root, 'docs/architecture.md'),
        '## Tables\n\n```\ncontacts      contacts/contacts.ts\ntags          contacts/tags.ts\n```\n',
      );
      await writeFile(join(root, 'src/contacts/contacts.ts'), "export const q = (db) => db.selectFrom('contacts').selectAll();\n");
      await writeFile(
        join(root, 'src/sending/send.ts'),
        [
          "export const a = (db) => db.updateTable('contacts').set({ status: 'x' });",
          "export const b = (trx) => trx\n  .selectFrom('contacts')\n  .selectAll();",
          // A sub-select of another table inside a statement of this module is fine.
          "export const c = (db) => db.selectFrom('deliveries as d').where(({ eb }) => eb.selectFrom('contacts'));",
          'export const d = sql`INSERT INTO deliveries (id) VALUES (1)`;',
        ].join('\n'),
      );
      const problems = await checkOwners(root);
      assert.match(problems.join('\n'), /names src\/contacts\/tags\.ts, which does not exist/);
      assert.match(problems.join('\n'), /src\/sending\/send\.ts:1 writes contacts, whose statements belong in src\/contacts\/contacts\.ts/);
      assert.match(problems.join('\n'), /src\/sending\/send\.ts:2 reads contacts, whose statements belong in src\/contacts\/contacts\.ts/);
      assert.match(problems.join('\n'), /writes deliveries, a table .* does not list/);
      assert.match(problems.join('\n'), /reads deliveries, a table .* does not list/);
      assert.equal(problems.length, 5, problems.join('\n'));
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
