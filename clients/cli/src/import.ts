import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { SingleBar } from 'cli-progress';
import { parse } from 'csv-parse/sync';
import type { ContactImportResult, Hopper } from '../../typescript/src/index.ts';
import { unwrap } from '../../typescript/src/index.ts';
import { CliError, type Io } from './output.ts';

/**
 * `hopper contacts import FILE.csv`: the file is read here and sent to
 * `POST /v3/users/{id}/contacts/import` in chunks of rows (each with the header row and an
 * Idempotency-Key of its own that its retries keep), so the progress bar moves and no request nears
 * the API's limits. The API reports refused rows by their line in the chunk; they are mapped back
 * to the line of the file. Rerunning the same file creates nothing: every row then matches the
 * contact it created and updates it.
 */

export interface ImportOptions {
  userId: number;
  tags: string[];
  /** Where refused rows go: the file's name with `.refused.csv` by default. */
  errorsPath: string;
  /** Rows per request. */
  chunkRows: number;
}

export interface ImportSummary {
  rows: number;
  created: number;
  updated: number;
  refused: { line: number; errors: Record<string, string[]> }[];
}

/** A chunk's CSV stays well under the API's 20 MB however wide the rows. */
const CHUNK_BYTES = 4 * 1024 * 1024;

interface Row {
  /** The line of the file where the row starts (the header is line 1), as the API counts it. */
  line: number;
  csv: string;
  /** Lines the row spans (a quoted cell may hold newlines). */
  lines: number;
}

export function defaultErrorsPath(file: string): string {
  return `${file.replace(/\.csv$/i, '')}.refused.csv`;
}

export async function importContacts(io: Io, hopper: Hopper, file: string, options: ImportOptions): Promise<ImportSummary> {
  const [header, rows] = readRows(await readFile(file, 'utf8'), file);
  const summary: ImportSummary = { rows: rows.length, created: 0, updated: 0, refused: [] };
  const bar = io.stderr.isTTY
    ? new SingleBar({
        stream: io.stderr,
        format: 'Importing {bar} {value}/{total} rows | {created} created, {updated} updated, {refused} refused | {eta_formatted}',
        hideCursor: true,
      })
    : undefined;
  bar?.start(rows.length, 0, { created: 0, updated: 0, refused: 0 });
  try {
    let done = 0;
    for (const chunk of chunks(rows, options.chunkRows)) {
      // The chunk's own line numbers, as the API will report them, back to the file's.
      const fileLine = new Map<number, number>();
      let line = 2;
      for (const row of chunk) {
        fileLine.set(line, row.line);
        line += row.lines;
      }
      const toFileLine = (chunkLine: number) => fileLine.get(chunkLine) ?? chunkLine;
      const result: ContactImportResult = await unwrap(
        hopper.api.POST('/v3/users/{user_id}/contacts/import', {
          params: { path: { user_id: options.userId }, query: options.tags.length > 0 ? { tag: options.tags } : {} },
          headers: { 'content-type': 'text/csv', 'idempotency-key': randomUUID() },
          body: [header, ...chunk.map((row) => row.csv)].join('\n'),
          bodySerializer: (body: string) => body,
        }),
      );
      summary.created += result.created;
      summary.updated += result.updated;
      for (const refused of result.refused) {
        const errors = Object.fromEntries(
          Object.entries(refused.errors).map(([field, reasons]) => [
            field,
            reasons.map((reason) => reason.replace(/\bline (\d+)/g, (_, n: string) => `line ${toFileLine(Number(n))}`)),
          ]),
        );
        summary.refused.push({ line: toFileLine(refused.line), errors });
      }
      done += chunk.length;
      bar?.update(done, { created: summary.created, updated: summary.updated, refused: summary.refused.length });
    }
  } finally {
    bar?.stop();
  }
  summary.refused.sort((a, b) => a.line - b.line);
  if (summary.refused.length > 0) await writeFile(options.errorsPath, refusedCsv(summary.refused));
  return summary;
}

/** The header and each row, re-written as CSV (every cell quoted) with the line it starts on. */
function readRows(text: string, file: string): [string, Row[]] {
  let records: { record: string[]; info: { lines: number } }[];
  try {
    records = parse(text, { bom: true, info: true, relax_column_count: true, skip_empty_lines: true }) as never;
  } catch (error) {
    throw new CliError(`${file} is not CSV that can be read: ${(error as Error).message}`);
  }
  const [header, ...rest] = records;
  if (!header) throw new CliError(`${file} is empty: its first row must name the fields (e.g. email,first_name,tags).`);
  const newlines = (record: string[]) => record.join('').match(/\n/g)?.length ?? 0;
  const rows = rest.map(({ record, info }) => ({
    // As the API counts: a record that spans lines is reported at its first line.
    line: info.lines - newlines(record),
    csv: toCsvLine(record),
    lines: newlines(record) + 1,
  }));
  return [toCsvLine(header.record), rows];
}

function toCsvLine(cells: string[]): string {
  return cells.map((cell) => `"${cell.replaceAll('"', '""')}"`).join(',');
}

function* chunks(rows: Row[], size: number): Generator<Row[]> {
  let chunk: Row[] = [];
  let bytes = 0;
  for (const row of rows) {
    if (chunk.length >= size || (chunk.length > 0 && bytes + row.csv.length > CHUNK_BYTES)) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    chunk.push(row);
    bytes += row.csv.length + 1;
  }
  if (chunk.length > 0) yield chunk;
}

/** `line,field,reason`: one line per reason, so it opens as a sheet and greps well. */
function refusedCsv(refused: ImportSummary['refused']): string {
  const lines = ['line,field,reason'];
  for (const { line, errors } of refused) {
    for (const [field, reasons] of Object.entries(errors)) {
      for (const reason of reasons) lines.push([String(line), field, reason].map(csvCell).join(','));
    }
  }
  return `${lines.join('\n')}\n`;
}

function csvCell(value: string): string {
  return /[",\n\r]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}
