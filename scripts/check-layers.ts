import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';

/**
 * `npm run check:layers`: every import in src/ goes to the same layer or one below it, the layers
 * being those of docs/architecture.md — the one place they are written. The check reads the first
 * code block under "## Layers": each line that starts at the margin is one layer, top first, and
 * names its modules (`app.ts`, `http/`, …) before the first run of two spaces; indented lines
 * carry on the description of the layer above. It fails on
 *
 * - an import (static, `import type`, re-export or dynamic) from a module to one of a higher layer;
 * - a file or folder of src/ that no layer names, and a name in the doc that src/ does not have,
 *   so the doc stays true line by line.
 *
 * Imports within one layer are free (madge, `npm run check:cycles`, refuses cycles).
 */
const ROOT = join(import.meta.dirname, '..');
const DOC = 'docs/architecture.md';

export interface Layers {
  /** Module name (`config.ts`, `http/`) → layer index, 0 being the top. */
  readonly rank: ReadonlyMap<string, number>;
  /** The doc's line of each layer, for messages. */
  readonly lines: readonly string[];
}

/** The layers as the doc writes them. */
export function parseLayers(markdown: string): Layers {
  const section = markdown.split(/^## /m).find((part) => part.startsWith('Layers'));
  const block = section && /```[a-z]*\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error(`${DOC}: no code block under "## Layers"`);
  const rank = new Map<string, number>();
  const lines: string[] = [];
  for (const line of block.split('\n')) {
    if (line.trim() === '' || /^\s/.test(line)) continue;
    const names = (line.split(/ {2,}/)[0] ?? '').split(/\s+/).filter(Boolean);
    for (const name of names) {
      if (!/^[a-z0-9-]+(\.ts|\/)$/.test(name)) throw new Error(`${DOC}: "${name}" (in "${line.trim()}") is not a file or folder of src/`);
      if (rank.has(name)) throw new Error(`${DOC}: ${name} is placed twice`);
      rank.set(name, lines.length);
    }
    lines.push(line.trim());
  }
  return { rank, lines };
}

/** The module a path of src/ belongs to: its top-level file, or its top-level folder. */
export function moduleOf(pathInSrc: string): string {
  const slash = pathInSrc.indexOf('/');
  return slash < 0 ? pathInSrc : `${pathInSrc.slice(0, slash + 1)}`;
}

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
}

/** Every problem found: climbing imports, modules the doc does not place, names the doc places that do not exist. */
export async function checkLayers(root = ROOT): Promise<string[]> {
  const layers = parseLayers(await readFile(join(root, DOC), 'utf8'));
  const src = join(root, 'src');
  const problems: string[] = [];
  const present = new Set((await readdir(src, { withFileTypes: true })).map((e) => (e.isDirectory() ? `${e.name}/` : e.name)));
  for (const name of present) {
    if (!layers.rank.has(name) && (name.endsWith('/') || name.endsWith('.ts'))) problems.push(`src/${name} is in no layer of ${DOC}`);
  }
  for (const name of layers.rank.keys()) if (!present.has(name)) problems.push(`${DOC} places ${name}, which src/ does not have`);

  for (const file of await sourceFiles(src)) {
    const from = moduleOf(relative(src, file));
    const fromRank = layers.rank.get(from);
    if (fromRank === undefined) continue;
    const { importedFiles } = ts.preProcessFile(await readFile(file, 'utf8'), true, true);
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = relative(src, join(dirname(file), fileName));
      if (target.startsWith('..')) continue;
      const to = moduleOf(target);
      const toRank = layers.rank.get(to);
      if (toRank !== undefined && toRank < fromRank) {
        problems.push(
          `${relative(root, file)} imports ${fileName}: ${from} ("${layers.lines[fromRank]}") may not import from ${to}, a layer above it ("${layers.lines[toRank]}")`,
        );
      }
    }
  }
  return problems;
}

if (import.meta.main) {
  const problems = await checkLayers();
  if (problems.length > 0) {
    console.error(`${problems.length} layer problem${problems.length === 1 ? '' : 's'}:\n  - ${problems.join('\n  - ')}`);
    process.exitCode = 1;
  } else {
    console.log(`Every import in src/ keeps to the layers of ${DOC}.`);
  }
}
