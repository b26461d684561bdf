import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { checkTypeScriptBlocks, typeScriptBlocks } from './typescript-blocks.ts';

/**
 * The docs' TypeScript examples compile, as their shell examples run (readme.test.ts): every
 * ```ts block of README.md, docs/*.md and clients/*\/README.md is type-checked against the typed
 * client's source, strict (conventions in typescript-blocks.ts).
 */
const ROOT = join(import.meta.dirname, '..', '..');
const FILES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
  ...readdirSync(join(ROOT, 'clients'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => `clients/${entry.name}/README.md`)
    .filter((file) => {
      try {
        readFileSync(join(ROOT, file));
        return true;
      } catch {
        return false;
      }
    }),
].sort();

test('every TypeScript block of the docs type-checks (one module per file, its blocks in order)', async () => {
  const files = Object.fromEntries(FILES.map((file) => [file, readFileSync(join(ROOT, file), 'utf8')]));
  const checked = Object.entries(files).filter(([, markdown]) => typeScriptBlocks(markdown).length > 0);
  assert.ok(
    checked.some(([file]) => file === 'clients/typescript/README.md'),
    "the typed client's README has blocks to check",
  );
  assert.deepEqual(await checkTypeScriptBlocks(files), []);
});

test('a block that does not type-check is reported at its line of the Markdown file; `<!-- not checked -->` leaves one out', async () => {
  const markdown = [
    '# Planted',
    '',
    '```ts',
    "import { createHopper } from '@hopper/client';",
    "const hopper = createHopper({ url: 'https://hopper.example.org', key: 'hop_…' });",
    '```',
    '',
    'Later, the same module:',
    '',
    '```ts',
    'const n: number = hopper.api;',
    '```',
    '',
    '<!-- not checked: pseudo-code -->',
    '```ts',
    'this is not TypeScript',
    '```',
  ].join('\n');
  const problems = await checkTypeScriptBlocks({ 'planted.md': markdown });
  assert.equal(problems.length, 1, problems.join('\n'));
  assert.match(problems[0] as string, /^planted\.md:11: TS2322: Type 'Client<paths/);
});
