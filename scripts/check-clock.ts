import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import ts from 'typescript';

/**
 * `npm run check:clock`: one clock (docs/architecture.md). Every time Hopper records comes from
 * `ctx.clock()`, which tests replace; what a job, a timer, a deadline or a rate limit waits on is
 * real time, read through src/time.ts's named helpers (`inRealTime(ms)`, `realTimeMs()`). So
 * src/time.ts is the one file that reads the system's clock, and the check fails on a read
 * anywhere else in src/: `Date.now` (called or passed), `new Date()` without an argument, and
 * `Date()` called as a function. `performance.now()` measures a duration, never a time, and is
 * left alone.
 */
const ROOT = join(import.meta.dirname, '..');
const ALLOWED = new Set(['time.ts']);

const isDate = (node: ts.Node) => ts.isIdentifier(node) && node.text === 'Date';

/** `file:line what` of every read of the system's clock outside src/time.ts. */
export async function rawClockReads(root = ROOT): Promise<string[]> {
  const src = join(root, 'src');
  const entries = await readdir(src, { withFileTypes: true, recursive: true });
  const found: string[] = [];
  for (const entry of entries) {
    const path = join(entry.parentPath, entry.name);
    const file = relative(src, path);
    if (!entry.isFile() || !file.endsWith('.ts') || ALLOWED.has(file)) continue;
    const source = ts.createSourceFile(path, await readFile(path, 'utf8'), ts.ScriptTarget.Latest, true);
    const report = (node: ts.Node, what: string) =>
      found.push(`src/${file}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1} ${what}`);
    const visit = (node: ts.Node) => {
      if (ts.isPropertyAccessExpression(node) && isDate(node.expression) && node.name.text === 'now') report(node, 'Date.now');
      else if (ts.isNewExpression(node) && isDate(node.expression) && (node.arguments?.length ?? 0) === 0) report(node, 'new Date()');
      else if (ts.isCallExpression(node) && isDate(node.expression)) report(node, 'Date()');
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found.sort();
}

if (import.meta.main) {
  const reads = await rawClockReads();
  if (reads.length > 0) {
    console.error(
      `${reads.length} read${reads.length === 1 ? '' : 's'} of the system's clock outside src/time.ts — a time Hopper records comes from ctx.clock(), a wait from inRealTime(ms) or realTimeMs():\n  - ${reads.join('\n  - ')}`,
    );
    process.exitCode = 1;
  } else {
    console.log("src/ reads the system's clock in src/time.ts only.");
  }
}
