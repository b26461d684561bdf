import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';

/**
 * `npm run check:owners`: every statement on a table lives in that table's module, the modules
 * being those of docs/architecture.md's "Tables" list — the one place they are written. A statement
 * belongs to the table it writes (INSERT, UPDATE, DELETE; `insertInto`, `updateTable`,
 * `deleteFrom`) or, for a read, to the table a database handle selects from (`db.selectFrom`,
 * `trx.selectFrom`); a statement may read other tables in its joins and sub-selects. The check
 * fails on such a statement outside its table's module, on a table the list does not place, and on
 * a module the list names that src/ does not have. Migrations are the schema's, not a module's.
 */
const ROOT = join(import.meta.dirname, '..');
const DOC = 'docs/architecture.md';

/** Table → the module (a path under src/) holding its statements. */
export function parseOwners(markdown: string): Map<string, string> {
  const section = markdown.split(/^## /m).find((part) => part.startsWith('Tables'));
  const block = section && /```[a-z]*\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error(`${DOC}: no code block under "## Tables"`);
  const owners = new Map<string, string>();
  for (const line of block.split('\n')) {
    if (line.trim() === '' || /^\s/.test(line)) continue;
    const [tables = '', module = ''] = line.split(/ {2,}/);
    if (!/^[a-z0-9/-]+\.ts$/.test(module.trim())) throw new Error(`${DOC}: "${line.trim()}" names no module (src/… .ts) after its tables`);
    for (const table of tables.split(/\s+/).filter(Boolean)) {
      if (owners.has(table)) throw new Error(`${DOC}: ${table} is listed twice`);
      owners.set(table, module.trim());
    }
  }
  return owners;
}

const WRITES =
  /\b(?:insertInto|updateTable|deleteFrom|mergeInto)\(\s*['"`]([a-z_]+)[\s'"`]|\b(?:INSERT INTO|UPDATE|DELETE FROM|MERGE INTO) ([a-z_]+)\b/g;
/** A select on a database handle (not on a sub-select's expression builder, `eb.selectFrom`). */
const READS = /\b(?:db|trx|database\.db|this\.#db)\s*\.selectFrom\(\s*['"`]([a-z_]+)[\s'"`]/g;

/** Every statement found outside its table's module, every table not listed, every listed module missing. */
export async function checkOwners(root = ROOT): Promise<string[]> {
  const owners = parseOwners(await readFile(join(root, DOC), 'utf8'));
  const src = join(root, 'src');
  const entries = await readdir(src, { withFileTypes: true, recursive: true });
  const files = entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
  const modules = new Set(files.map((file) => relative(src, file)));
  const problems: string[] = [];
  for (const module of new Set(owners.values()))
    if (!modules.has(module)) problems.push(`${DOC} names src/${module}, which does not exist`);
  for (const file of files) {
    const module = relative(src, file);
    if (module.startsWith('db/migrations/')) continue;
    const text = await readFile(file, 'utf8');
    for (const [pattern, what] of [
      [WRITES, 'writes'],
      [READS, 'reads'],
    ] as const) {
      for (const match of text.matchAll(pattern)) {
        const table = match[1] ?? match[2] ?? '';
        const owner = owners.get(table);
        if (owner === undefined) {
          if (what === 'writes' || table !== '') problems.push(`src/${module} ${what} ${table}, a table ${DOC} does not list`);
        } else if (owner !== module) {
          const line = text.slice(0, match.index).split('\n').length;
          problems.push(`src/${module}:${line} ${what} ${table}, whose statements belong in src/${owner}`);
        }
      }
    }
  }
  return [...new Set(problems)];
}

if (import.meta.main) {
  const problems = await checkOwners();
  if (problems.length > 0) {
    console.error(
      `${problems.length} statement${problems.length === 1 ? ' is' : 's are'} outside their table's module:\n  - ${problems.join('\n  - ')}`,
    );
    process.exitCode = 1;
  } else {
    console.log(`Every statement of src/ is in its table's module (${DOC}).`);
  }
}
