import { HopperProblem } from '../../typescript/src/index.ts';

/** Where a command writes: the process's streams in `hopper`, others in tests. */
export interface Io {
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
}

/** A failure the user can act on: printed as it is, exit code 1 (2 for a usage error). */
export class CliError extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** Rows as an aligned plain-text table, the header first; numbers are right-aligned. */
export function table(header: string[], rows: (string | number | null | undefined)[][]): string {
  const cells = [header, ...rows.map((row) => row.map((cell) => (cell === null || cell === undefined ? '' : String(cell))))];
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((row) => typeof row[i] === 'number'));
  const widths = header.map((_, i) => Math.max(...cells.map((row) => row[i]?.length ?? 0)));
  return cells
    .map((row) =>
      row
        .map((cell, i) => (numeric[i] ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
    .concat('\n');
}

/** What went wrong, in words: a problem's title, detail and field errors, or the error's message. */
export function describeError(error: unknown): string {
  if (error instanceof HopperProblem) {
    const lines = [`${error.title} (${error.status}): ${error.message}`];
    for (const [field, reasons] of Object.entries(error.errors ?? {})) lines.push(`  ${field}: ${reasons.join('; ')}`);
    return lines.join('\n');
  }
  if (error instanceof CliError) return error.message;
  const cause = (error as { cause?: { message?: string; code?: string } })?.cause;
  const message = error instanceof Error ? error.message : String(error);
  return cause?.message ? `${message}: ${cause.message}` : message;
}
