import { isUtf8 } from 'node:buffer';
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
  /** `NAME:field` mappings of columns, passed on as the API's `column` parameters. */
  columns: string[];
}

export interface ImportSummary {
  rows: number;
  created: number;
  updated: number;
  refused: { line: number; errors: Record<string, string[]> }[];
  /** How the file was read: its encoding and separator (found here), its columns (mapped by the API). */
  encoding: string;
  separator: string;
  columns: Record<string, string>;
  ignored: string[];
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
  const { text, encoding } = decode(await readFile(file), file);
  const separator = sniffSeparator(text);
  const [header, rows] = readRows(text, separator, file);
  const summary: ImportSummary = { rows: rows.length, created: 0, updated: 0, refused: [], encoding, separator, columns: {}, ignored: [] };
  const query = {
    ...(options.tags.length > 0 ? { tag: options.tags } : {}),
    ...(options.columns.length > 0 ? { column: options.columns } : {}),
  };
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
          params: { path: { user_id: options.userId }, query },
          // Re-written here as UTF-8 with commas, whatever the file's encoding and separator.
          headers: { 'content-type': 'text/csv; charset=utf-8', 'idempotency-key': randomUUID() },
          body: [header, ...chunk.map((row) => row.csv)].join('\n'),
          bodySerializer: (body: string) => body,
        }),
      );
      summary.columns = result.file?.columns ?? {};
      summary.ignored = result.file?.ignored_columns ?? [];
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
function readRows(text: string, separator: string, file: string): [string, Row[]] {
  let records: { record: string[]; info: { lines: number } }[];
  try {
    records = parse(text, {
      bom: true,
      delimiter: separator,
      from_line: /^\uFEFF?sep=.\r?\n/i.test(text) ? 2 : 1,
      info: true,
      relax_column_count: true,
      skip_empty_lines: true,
    }) as never;
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

/**
 * The file's text, as the API finds it (docs/contacts.md, "Bulk import"): UTF-8 or UTF-16 by a byte
 * order mark, UTF-8 when the bytes are, else Windows-1252 (Excel's and Outlook's "ANSI"), unless
 * they hold bytes that encoding leaves undefined: then the file is refused, never read with U+FFFD.
 */
function decode(bytes: Buffer, file: string): { text: string; encoding: string } {
  const as = (encoding: string) => ({ text: new TextDecoder(encoding, { fatal: true }).decode(bytes), encoding });
  try {
    if (bytes[0] === 0xff && bytes[1] === 0xfe) return as('utf-16le');
    if (bytes[0] === 0xfe && bytes[1] === 0xff) return as('utf-16be');
    if (isUtf8(bytes)) return as('utf-8');
  } catch {
    throw new CliError(`${file} starts with a UTF-16 byte order mark but is not UTF-16: save it again as "CSV UTF-8".`);
  }
  const odd = bytes.findIndex((byte) => byte === 0 || [0x81, 0x8d, 0x8f, 0x90, 0x9d].includes(byte));
  if (odd !== -1) {
    const line = bytes.subarray(0, odd).filter((byte) => byte === 0x0a).length + 1;
    throw new CliError(`${file} is neither UTF-8 nor Windows-1252 (line ${line} holds a byte that is in neither): save it as "CSV UTF-8".`);
  }
  return { text: new TextDecoder('windows-1252').decode(bytes), encoding: 'windows-1252' };
}

/** Excel's `sep=` line, else the most frequent of `,` `;` tab in the header row outside quotes. */
function sniffSeparator(text: string): string {
  const hint = /^\uFEFF?sep=([,;\t])\r?\n/i.exec(text);
  if (hint) return hint[1] as string;
  const counts: Record<string, number> = { ',': 0, ';': 0, '\t': 0 };
  let quoted = false;
  for (const char of text) {
    if (char === '"') quoted = !quoted;
    else if (!quoted && (char === '\n' || char === '\r')) break;
    else if (!quoted && char in counts) counts[char] = (counts[char] ?? 0) + 1;
  }
  return ['\t', ';', ','].reduce((best, candidate) => ((counts[candidate] ?? 0) > (counts[best] ?? 0) ? candidate : best), ',');
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
