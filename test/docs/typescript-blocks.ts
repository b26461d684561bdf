import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';

/**
 * The TypeScript examples of the docs, type-checked as a reader's project would compile them
 * (test/docs/typescript-blocks.test.ts runs it on README.md, docs/*.md and clients/*\/README.md).
 *
 * Conventions for writers:
 * - Every ```ts (or ```typescript) block is checked; ```js and other fences are shown only. A block
 *   right after a `<!-- not checked -->` line (a reason may follow) is not.
 * - The blocks of one file are one module, in order, as the shell blocks of a file are one session:
 *   a later block may use what an earlier one declared (`hopper`), and must import or declare
 *   everything else it names.
 * - `@hopper/client` is the typed client's source (clients/typescript/src), Node's modules are
 *   typed by @types/node, and top-level `await` is allowed; the compiler options are the
 *   repository's own (strict).
 */

const ROOT = join(import.meta.dirname, '..', '..');
const TS_INFO = new Set(['ts', 'typescript']);
const NOT_CHECKED = /^<!--\s*not checked\b.*-->$/;

interface TypeScriptBlock {
  /** Line of the block's first line of code in the Markdown file (1-based). */
  line: number;
  lines: string[];
}

/** The ```ts blocks of `markdown`, in order, without those marked `<!-- not checked -->` just above. */
export function typeScriptBlocks(markdown: string): TypeScriptBlock[] {
  const lines = markdown.split('\n');
  const blocks: TypeScriptBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```\s*([\w-]*)/.exec(lines[i] as string);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i] as string); i++) body.push(lines[i] as string);
    let before = start - 1;
    while (before >= 0 && (lines[before] as string).trim() === '') before--;
    const mark = before >= 0 ? (lines[before] as string).trim() : '';
    if (TS_INFO.has(open[1] ?? '') && !NOT_CHECKED.test(mark)) blocks.push({ line: start + 2, lines: body });
  }
  return blocks;
}

/**
 * Type-checks the TypeScript blocks of each named Markdown text (one module per file, blocks in
 * order); returns each problem as `file:line: message`, the line the Markdown file's.
 */
export async function checkTypeScriptBlocks(files: Record<string, string>): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'hopper-doc-ts-'));
  try {
    /** For each generated module: the Markdown file and, per line of the module, the Markdown line. */
    const origins = new Map<string, { file: string; lines: number[] }>();
    for (const [file, markdown] of Object.entries(files)) {
      const blocks = typeScriptBlocks(markdown);
      if (blocks.length === 0) continue;
      const code: string[] = [];
      const lines: number[] = [];
      for (const block of blocks) {
        block.lines.forEach((text, i) => {
          code.push(text);
          lines.push(block.line + i);
        });
      }
      // A module, whatever its blocks hold: top-level await is allowed, and its names are its own.
      code.push('export {};');
      const path = join(dir, `${file.replace(/[^\w.-]+/g, '_')}.mts`);
      await writeFile(path, `${code.join('\n')}\n`);
      origins.set(path, { file, lines });
    }
    if (origins.size === 0) return [];
    const program = ts.createProgram([...origins.keys()], compilerOptions());
    return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
      const origin = diagnostic.file && origins.get(diagnostic.file.fileName);
      if (!diagnostic.file || diagnostic.start === undefined || !origin) return `TS${diagnostic.code}: ${text}`;
      const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
      return `${origin.file}:${origin.lines[line] ?? '?'}: TS${diagnostic.code}: ${text}`;
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The repository's tsconfig.json, with `@hopper/client` pointing at the client's source. */
function compilerOptions(): ts.CompilerOptions {
  const configPath = join(ROOT, 'tsconfig.json');
  const { config } = ts.readConfigFile(configPath, ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT);
  return {
    ...options,
    noEmit: true,
    typeRoots: [join(ROOT, 'node_modules', '@types')],
    paths: { '@hopper/client': [join(ROOT, 'clients', 'typescript', 'src', 'index.ts')] },
  };
}
