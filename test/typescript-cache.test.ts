import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

/**
 * src/typescript-cache.mjs, which `npm start` preloads: a process runs Hopper's TypeScript without
 * loading Node's type stripper (amaro), from stripped copies kept under node_modules/.cache by
 * the hash of each source. Run here on a small tree of its own (src/ with two modules), as
 * `npm start` runs it.
 */
const HOOK = join(import.meta.dirname, '..', 'src', 'typescript-cache.mjs');
const root = mkdtempSync(join(tmpdir(), 'hopper-ts-cache-'));
const cache = join(root, 'node_modules', '.cache', 'hopper-typescript');
after(() => rmSync(root, { recursive: true, force: true }));

mkdirSync(join(root, 'src'));
copyFileSync(HOOK, join(root, 'src', 'typescript-cache.mjs'));
writeFileSync(join(root, 'package.json'), '{"type":"module"}\n');
const writeGreeting = (word: string) =>
  writeFileSync(
    join(root, 'src', 'greeting.ts'),
    `interface Greeting { word: string }\nexport const greeting: Greeting = { word: '${word}' };\n`,
  );
writeFileSync(
  join(root, 'src', 'main.ts'),
  [
    "import { greeting } from './greeting.ts';",
    'type Line = string;',
    'const where: Line = new Error().stack?.split("\\n")[1]?.trim() ?? "";',
    'const stripper = process.moduleLoadList.some((name) => name.includes("amaro"));',
    'console.log(JSON.stringify({ word: greeting.word, where, stripper }));',
    '',
  ].join('\n'),
);

/** Runs src/main.ts of the tree, with the cache preloaded or not: what it printed, and its warnings. */
function run(preload = true): { word: string; where: string; stripper: boolean; warnings: string } {
  const args = [...(preload ? ['--import=./src/typescript-cache.mjs'] : []), 'src/main.ts'];
  const child = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
  assert.equal(child.status, 0, child.stderr);
  return { ...JSON.parse(child.stdout), warnings: child.stderr };
}

describe("npm start's TypeScript cache", () => {
  test('without it the process loads the stripper; with it, not, and the code and its positions are the same', () => {
    writeGreeting('hello');
    const plain = run(false);
    assert.equal(plain.stripper, true, 'Node strips in the process by itself');
    const cached = run();
    assert.deepEqual(cached, { ...plain, stripper: false, warnings: '' });
    assert.match(cached.where, /main\.ts:3:/, 'a stack trace points at the .ts line');
    assert.equal(readdirSync(cache).length, 2, 'one stripped file per source');
  });

  test('a changed source is stripped again and the stale copy removed; the others are kept', () => {
    writeGreeting('hello');
    run();
    const before = new Set(readdirSync(cache));
    writeGreeting('bonjour');
    assert.equal(run().word, 'bonjour');
    const now = new Set(readdirSync(cache));
    assert.equal(now.size, 2);
    assert.equal([...now].filter((name) => before.has(name)).length, 1, "main.ts's copy stays, greeting.ts's is new");
    for (const name of now) assert.doesNotMatch(readFileSync(join(cache, name), 'utf8'), /interface|: Line/);
  });

  test('a module whose stripped copy is gone is stripped by Node, not refused', () => {
    writeGreeting('hej');
    run();
    // main.ts imports greeting.ts at once; this process loads it later, after its copy was removed.
    writeFileSync(
      join(root, 'src', 'late.ts'),
      [
        "import { rmSync, readdirSync } from 'node:fs';",
        "const cache = 'node_modules/.cache/hopper-typescript';",
        "for (const name of readdirSync(cache)) rmSync(cache + '/' + name);",
        "const { greeting } = await import('./greeting.ts');",
        'const word: string = greeting.word;',
        'console.log(JSON.stringify({ word, where: "", stripper: process.moduleLoadList.some((n) => n.includes("amaro")) }));',
        '',
      ].join('\n'),
    );
    const child = spawnSync(process.execPath, ['--import=./src/typescript-cache.mjs', 'src/late.ts'], { cwd: root, encoding: 'utf8' });
    assert.equal(child.status, 0, child.stderr);
    assert.deepEqual(JSON.parse(child.stdout), { word: 'hej', where: '', stripper: true });
    rmSync(join(root, 'src', 'late.ts'));
  });

  test('a cache that cannot be written leaves Node to strip as usual, with a warning', () => {
    rmSync(join(root, 'node_modules'), { recursive: true, force: true });
    writeFileSync(join(root, 'node_modules'), 'not a folder');
    writeGreeting('hallo');
    try {
      const out = run();
      assert.deepEqual([out.word, out.stripper], ['hallo', true]);
      assert.match(out.warnings, /HOPPER_TYPESCRIPT_CACHE.*TypeScript is stripped in this process instead/);
    } finally {
      rmSync(join(root, 'node_modules'), { force: true });
    }
  });
});
