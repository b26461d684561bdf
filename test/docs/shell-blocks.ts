/**
 * The shell examples of a Markdown file, turned into one bash script the doc-test runs
 * (test/docs/readme.test.ts has the conventions).
 */

export interface ShellBlock {
  /** Line of the opening fence (1-based). */
  line: number;
  lines: string[];
  /**
   * Marked `<!-- set-up -->`: the lines a reader adapts to their own install (the address and key
   * the first start printed). The doc-test runs it with those two values put in for its server's.
   */
  setup: boolean;
}

const RUN_INFO = new Set(['sh', 'bash']);
const NOT_RUN = /^<!--\s*not run\b.*-->$/;
const SET_UP = /^<!--\s*set-up\b.*-->$/;
/** `# → 404` (a status, then anything): what the command that ends on, or just before, this line answers. */
const ANNOUNCED = /(?:^|\s)#\s*→\s*(\d{3})\b/;

/**
 * The ```sh and ```bash blocks, in order, without those marked `<!-- not run -->` just above;
 * those marked `<!-- set-up -->` are flagged.
 */
export function shellBlocks(markdown: string): ShellBlock[] {
  const lines = markdown.split('\n');
  const blocks: ShellBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```\s*([\w-]*)/.exec(lines[i] as string);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i] as string); i++) body.push(lines[i] as string);
    let before = start - 1;
    while (before >= 0 && (lines[before] as string).trim() === '') before--;
    const mark = before >= 0 ? (lines[before] as string).trim() : '';
    if (RUN_INFO.has(open[1] ?? '') && !NOT_RUN.test(mark)) blocks.push({ line: start + 1, lines: body, setup: SET_UP.test(mark) });
  }
  return blocks;
}

interface LineShape {
  /** The line begins a new command (not inside quotes or `$(…)`, not after `\`, `|`, `&&` or `||`). */
  starts: boolean;
  /** The line holds code outside a comment. */
  code: boolean;
  /** The command goes on past this line. */
  continues: boolean;
}

/** A small shell lexer: enough to tell where each command starts and ends across lines. */
function shapes(lines: string[]): LineShape[] {
  let single = false;
  let double = false;
  let continued = false;
  let depth = 0; // open `$(`
  let heredoc: string | undefined;
  return lines.map((text) => {
    if (heredoc !== undefined) {
      // A here-document's lines belong to the command that opened it, up to its terminator.
      if (text.replace(/^\t+/, '') === heredoc) heredoc = undefined;
      return { starts: false, code: true, continues: heredoc !== undefined || continued };
    }
    const starts = !single && !double && !continued;
    let code = single || double;
    let escaped = false;
    for (let i = 0; i < text.length; i++) {
      const c = text[i] as string;
      if (escaped) {
        escaped = false;
      } else if (single) {
        if (c === "'") single = false;
      } else if (c === '\\') {
        escaped = true;
      } else if (double) {
        if (c === '"') double = false;
      } else if (c === '$' && text[i + 1] === '(') {
        depth++;
        i++;
      } else if (c === ')' && depth > 0) {
        depth--;
      } else if (c === "'") {
        single = true;
      } else if (c === '"') {
        double = true;
      } else if (c === '#' && (i === 0 || /\s/.test(text[i - 1] as string))) {
        break;
      }
      if (!/\s/.test(c)) code = true;
    }
    const bare = text.replace(/\s#.*$|^#.*$/, '').trimEnd();
    continued = single || double || escaped || depth > 0 || /(\||&&)$/.test(bare);
    heredoc = single || double ? undefined : /<<-?\s*['"]?(\w+)['"]?/.exec(bare)?.[1];
    return { starts, code, continues: continued || heredoc !== undefined };
  });
}

/**
 * The block as bash, with each announced status turned into `__doc_expect NNN` before the command
 * it is about and `__doc_expect_done` after it. `map` receives, for each script line written, the
 * Markdown line it comes from.
 */
export function scriptOf(block: ShellBlock, emit: (text: string, markdownLine: number) => void): void {
  const shape = shapes(block.lines);
  const before = new Map<number, string[]>();
  const after = new Map<number, string[]>();
  block.lines.forEach((text, i) => {
    const announced = ANNOUNCED.exec(text);
    if (!announced) return;
    // The command ending on this line, or (for a comment alone on its line) the one before it.
    let end = i;
    if (!(shape[i] as LineShape).code || (shape[i] as LineShape).continues) {
      end = i - 1;
      while (end >= 0 && (!(shape[end] as LineShape).code || (shape[end] as LineShape).continues)) end--;
    }
    if (end < 0) throw new Error(`line ${block.line + 1 + i}: "${text.trim()}" announces a status, but no command precedes it`);
    let start = end;
    while (start > 0 && !(shape[start] as LineShape).starts) start--;
    before.set(start, [...(before.get(start) ?? []), `__doc_expect ${announced[1]} ${block.line + 1 + i}`]);
    after.set(end, [...(after.get(end) ?? []), '__doc_expect_done']);
  });
  block.lines.forEach((text, i) => {
    const line = block.line + 1 + i;
    for (const extra of before.get(i) ?? []) emit(extra, line);
    emit(text, line);
    for (const extra of after.get(i) ?? []) emit(extra, line);
  });
}
