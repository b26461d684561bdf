import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import ts from 'typescript';

/**
 * `npm run check:functions`: no function in src/ runs over MAX_LINES lines, from its first line
 * to its last, the functions it holds included: one that long does several things, and each
 * deserves a name (docs/architecture.md). Migrations are exempt: each is a script of the schema's
 * history, written once and never changed.
 */
const ROOT = join(import.meta.dirname, '..');
export const MAX_LINES = 100;

/** The name a function goes by: its own, the variable, property or method it is assigned to, or "(anonymous)". */
function nameOf(node: ts.SignatureDeclaration, source: ts.SourceFile): string {
  if (node.name) return node.name.getText(source);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name) {
    return parent.name.getText(source);
  }
  return '(anonymous)';
}

/** `file:line name (n lines)` of every function of `root`'s src/ longer than `limit` lines, longest first. */
export async function longFunctions(root = ROOT, limit = MAX_LINES): Promise<string[]> {
  const src = join(root, 'src');
  const found: { lines: number; text: string }[] = [];
  for (const entry of await readdir(src, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    const file = relative(src, path);
    if (!entry.isFile() || !file.endsWith('.ts') || file.startsWith('db/migrations/')) continue;
    const source = ts.createSourceFile(path, await readFile(path, 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node) => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const lines = source.getLineAndCharacterOfPosition(node.getEnd()).line - first + 1;
        if (lines > limit) found.push({ lines, text: `src/${file}:${first + 1} ${nameOf(node, source)} (${lines} lines)` });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found.sort((a, b) => b.lines - a.lines).map((f) => f.text);
}

if (import.meta.main) {
  const long = await longFunctions();
  if (long.length > 0) {
    console.error(
      `${long.length} function${long.length === 1 ? '' : 's'} of src/ over ${MAX_LINES} lines (split each into functions named for what they do):\n  - ${long.join('\n  - ')}`,
    );
    process.exitCode = 1;
  } else {
    console.log(`No function of src/ is over ${MAX_LINES} lines.`);
  }
}
