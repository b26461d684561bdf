import { pipeline } from 'node:stream/promises';
import { setImmediate } from 'node:timers/promises';
import { CsvError, type Info, parse } from 'csv-parse';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import type { OneConnection } from '../db/one-connection.ts';
import { addressFreedMeanwhile, DomainError, type FieldErrors } from '../errors.ts';
import { jsonTextProblem } from '../json-text.ts';
import {
  analyzeContacts,
  type ContactFields,
  type ContactInput,
  contactChanges,
  contactStatisticsStale,
  contactsHoldingEmails,
  contactsWithPhonesOnly,
  insertContactRows,
  personsWordErrors,
  personsWordOf,
  updateContactColumns,
} from './contacts.ts';
import { type FileText, type Mapping, mapColumns, rowBody, type Separator, sniffSeparator } from './csv-file.ts';
import { ensureTags, linkContactTags, tagKey } from './tags.ts';

/**
 * Bulk import of contacts from CSV (a header row naming the fields) or JSON lines: each row is
 * checked like a contact body; a row whose email (any case) or, without an email, whose phone
 * matches a live contact of the user updates it (the columns present, tags added), the others are
 * created. Rows are written in batches, each in one transaction, with one multi-row statement per
 * table, so a crash never leaves half a row and a rerun of the same file creates nothing new.
 */

const MAX_IMPORT_ROWS = 50_000;
export const MAX_IMPORT_BYTES = 20 * 1024 * 1024;
const BATCH = 1000;
/**
 * On PGlite a batch's transaction holds the one connection every other request waits for, and its
 * statements run on the event loop: there batches are sized to take about BATCH_CPU_MS of this
 * thread's CPU each (as many rows as the last batch wrote in that time, from MIN_BATCH up to
 * BATCH, at most doubling), some 300 rows, and each waits for a pause in the requests' use of the
 * connection (db/one-connection.ts), so that a request waits for one batch at most. CPU time, not
 * the clock's: on a loaded machine the clock's time grows, the work does not, and ever smaller
 * batches would only add to the load.
 */
const BATCH_CPU_MS = 25;
const MIN_BATCH = 50;
const FIRST_ONE_CONNECTION_BATCH = 100;
const FIRST_ANALYZE = 5000;
const YIELD_EVERY = 100;

export const ImportResult = Type.Object(
  {
    created: Type.Integer({ minimum: 0, description: 'Contacts created' }),
    updated: Type.Integer({ minimum: 0, description: 'Existing contacts (matched by email, or by phone without one) updated' }),
    refused: Type.Array(
      Type.Object(
        {
          line: Type.Integer({ minimum: 1, description: 'Line of the file where the row starts (the CSV header is line 1)' }),
          errors: Type.Record(Type.String(), Type.Array(Type.String()), { description: 'What is wrong, by field' }),
        },
        { title: 'RefusedRow' },
      ),
    ),
    file: Type.Optional(
      Type.Object(
        {
          encoding: Type.String({ description: 'The encoding the file was read in (utf-8, utf-16le, utf-16be, windows-1252, …)' }),
          separator: Type.String({ description: 'The separator between cells: `,` `;` or a tab' }),
          columns: Type.Record(Type.String(), Type.String(), { description: 'Each column of the header read, and the field it went to' }),
          ignored_columns: Type.Array(Type.String(), { description: 'The header columns that went to no field' }),
        },
        { title: 'CsvReading', description: 'How a CSV file was read (absent for JSON lines)' },
      ),
    ),
  },
  { title: 'ContactImportResult' },
);
export type ImportResult = { created: number; updated: number; refused: { line: number; errors: FieldErrors }[]; file?: CsvReading };

/** One row as read from the file: its line and the body it stands for. */
interface ImportRow {
  line: number;
  body: Record<string, unknown>;
}

/** Checks a row's body against the contact body schema; the HTTP layer words the errors. */
type RowCheck = (body: Record<string, unknown>) => FieldErrors | undefined;

/** How a CSV file was read, for the answer: what the client can check and correct. */
interface CsvReading {
  encoding: string;
  separator: string;
  columns: Record<string, string>;
  ignored_columns: string[];
}

/**
 * Parses CSV (contacts/csv-file.ts): the text's slices parsed as they are decoded (csv-parse's
 * streaming parser, a slice a turn of the event loop), the separator sniffed; `take` is given each
 * record with the line it ends on, the header first. A file that cannot be parsed is refused whole.
 */
async function parseCsv({ slices }: FileText, take: (record: string[], lines: number) => void): Promise<Separator> {
  const first = await slices.next();
  const head = first.done ? '' : first.value;
  const { separator, headerLine } = sniffSeparator(head);
  try {
    await pipeline(
      (async function* () {
        yield head;
        yield* slices;
      })(),
      parse({ bom: true, delimiter: separator, from_line: headerLine, info: true, relax_column_count: true, skip_empty_lines: true }),
      async (records: AsyncIterable<{ record: string[]; info: Info }>) => {
        for await (const { record, info } of records) take(record, info.lines);
      },
    );
  } catch (error) {
    if (error instanceof CsvError) throw new DomainError('bad_request', `The CSV cannot be read: ${error.message}`);
    throw error;
  }
  return separator;
}

const EMPTY_CSV = 'The CSV is empty: its first row must name the fields.';

/**
 * Reads CSV: the header's columns mapped to fields (aliases, or the explicit `mapping`), `tags`
 * separated by `;` only. The whole file is read before anything is written: a file that cannot be
 * read is refused whole.
 */
export async function readCsv(text: FileText, mapping: Mapping): Promise<{ rows: ImportRow[]; reading: CsvReading }> {
  let header: string[] | undefined;
  let map: ReturnType<typeof mapColumns> | undefined;
  const rows: ImportRow[] = [];
  const separator = await parseCsv(text, (record, lines) => {
    if (!map) {
      header = record;
      map = mapColumns(record, mapping);
      return;
    }
    tooMany(rows.length + 1);
    rows.push(importRow(record, lines, map, (header as string[]).length));
  });
  if (!header || !map) throw new DomainError('bad_request', EMPTY_CSV);
  const columns: Record<string, string> = {};
  for (const { column, field } of map.fields) columns[header[column] as string] = field;
  return { rows, reading: { encoding: text.encoding, separator, columns, ignored_columns: map.ignored } };
}

/** A CSV file read for a preview of its mapping: its header, its first rows and how many it has. */
interface CsvPreview {
  encoding: string;
  separator: string;
  header: string[];
  /** The first rows' cells, each with the line it starts on. */
  sample: { line: number; cells: string[] }[];
  rows: number;
}

/**
 * Reads a whole CSV as `readCsv` does (the same parsing, encodings and limits) without mapping its
 * columns, which the person previewing it chooses: a file that `readCsv` could not read is refused
 * here, before it is kept.
 */
export async function previewCsv(text: FileText, sampleRows: number): Promise<CsvPreview> {
  let header: string[] | undefined;
  const sample: CsvPreview['sample'] = [];
  let rows = 0;
  const separator = await parseCsv(text, (record, lines) => {
    if (!header) {
      header = record;
      return;
    }
    tooMany(++rows);
    if (sample.length < sampleRows) sample.push({ line: startLine(record, lines), cells: record });
  });
  if (!header) throw new DomainError('bad_request', EMPTY_CSV);
  return { encoding: text.encoding, separator, header, sample, rows };
}

/** One record as a row: its body, and the line it starts on. */
function importRow(record: string[], lines: number, map: ReturnType<typeof mapColumns>, width: number): ImportRow {
  const body = rowBody(record, map);
  if (record.length > width) body[''] = record.slice(width);
  return { line: startLine(record, lines), body };
}

/** The line a record starts on: `lines`, where it ends, less the newlines in its cells. */
function startLine(record: string[], lines: number): number {
  let newlines = 0;
  for (const cell of record) if (cell.includes('\n')) newlines += cell.split('\n').length - 1;
  return lines - newlines;
}

/** Reads JSON lines: one contact body per non-blank line, the lines taken from the text's slices as they come. */
export async function readJsonLines({ slices }: FileText): Promise<ImportRow[]> {
  const rows: ImportRow[] = [];
  let line = 0;
  const take = (source: string) => {
    line++;
    if (source.trim() === '') return;
    tooMany(rows.length + 1);
    let body: unknown;
    try {
      body = JSON.parse(source);
    } catch {
      body = undefined;
    }
    const object = body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : { '': source };
    rows.push({ line, body: object });
  };
  // A line may run over several slices: its start is carried to the next.
  let carried = '';
  for await (const slice of slices) {
    let start = 0;
    for (let end = slice.indexOf('\n'); end !== -1; end = slice.indexOf('\n', start)) {
      take(carried + slice.slice(start, end));
      carried = '';
      start = end + 1;
    }
    carried += slice.slice(start);
  }
  take(carried);
  return rows;
}

function tooMany(rows: number): void {
  if (rows > MAX_IMPORT_ROWS) {
    throw new DomainError('payload_too_large', `An import takes at most ${MAX_IMPORT_ROWS} rows; split the file.`);
  }
}

interface Checked {
  line: number;
  fields: ContactFields;
  present: (keyof ContactFields)[];
  tags: string[];
}

/**
 * Imports the rows for `userId`, adding `extraTags` to every imported contact. `oneConnection`:
 * the database is one connection that every request shares (PGlite), so batches are kept short and
 * each waits for a pause in the requests' use of it. `progress` is told how many rows are done
 * each time a batch is written.
 */
export async function importContacts(
  db: Db,
  userId: number,
  rows: ImportRow[],
  check: RowCheck,
  extraTags: string[],
  now: Date,
  { oneConnection, progress }: { oneConnection?: OneConnection | undefined; progress?: (rowsDone: number) => Promise<void> } = {},
): Promise<ImportResult> {
  const writer = new BatchWriter(db, userId, now, oneConnection);
  const { result } = writer;
  // The rows of the next batch are checked while the database writes the previous one: batches
  // are written one after the other, and checking yields every few rows so that the batch in
  // flight can send its next statement, and other requests are served.
  let writing: Promise<void> = Promise.resolve();
  let batch: Checked[] = [];
  const firstLineOf = new Map<string, number>();
  for (const [index, { line, body }] of rows.entries()) {
    if (index % YIELD_EVERY === YIELD_EVERY - 1) await setImmediate();
    const row = checkRow(line, body, check, extraTags, firstLineOf, now);
    if ('errors' in row) {
      result.refused.push(row);
      continue;
    }
    batch.push(row);
    if (batch.length >= writer.batchSize) {
      await writing;
      const done = index + 1;
      writing = writer.write(batch).then(() => progress?.(done));
      // Awaited before the next batch or at the end; a failure meanwhile is not unhandled.
      writing.catch(() => {});
      batch = [];
    }
  }
  await writing;
  if (batch.length > 0) await writer.write(batch);
  await writer.freshenStatistics(true);
  result.refused.sort((a, b) => a.line - b.line);
  return result;
}

/** Writes the batches of one import, one after the other, and keeps the planner's statistics fresh. */
class BatchWriter {
  readonly result: ImportResult = { created: 0, updated: 0, refused: [] };
  /** How many rows the next batch takes. */
  batchSize: number;
  #nextAnalyze = FIRST_ANALYZE;
  /** Rows written since the table's counters were last looked at. */
  #unchecked = 0;

  readonly #db: Db;
  readonly #userId: number;
  readonly #now: Date;
  readonly #oneConnection: OneConnection | undefined;

  constructor(db: Db, userId: number, now: Date, oneConnection: OneConnection | undefined) {
    this.#db = db;
    this.#userId = userId;
    this.#now = now;
    this.#oneConnection = oneConnection;
    this.batchSize = oneConnection ? FIRST_ONE_CONNECTION_BATCH : BATCH;
  }

  async write(batch: Checked[]): Promise<void> {
    // On PGlite, after the requests that are using the connection: each waits for one batch at most.
    await this.#oneConnection?.quiet();
    const started = process.threadCpuUsage();
    const { created, updated, refused } = await writeBatch(this.#db, this.#userId, batch, this.#now);
    if (this.#oneConnection) {
      const { user, system } = process.threadCpuUsage(started);
      const fits = Math.round((batch.length * BATCH_CPU_MS * 1000) / Math.max(user + system, 1000));
      this.batchSize = Math.max(MIN_BATCH, Math.min(BATCH, 2 * batch.length, fits));
    }
    this.result.created += created;
    this.result.updated += updated;
    this.result.refused.push(...refused);
    this.#unchecked += batch.length;
    await this.freshenStatistics(false);
  }

  /**
   * A large import changes the table faster than autovacuum re-reads it: fresh statistics keep the
   * matching statements on their indexes for the batches that follow (docs/decisions.md, "A bulk
   * import runs ANALYZE"). Each time the rows created double (5,000, 10,000, 20,000, …), so the
   * statistics stay within a factor of two for a handful of ANALYZEs, each reading a sample of the
   * table. An import sent in chunks (the CLI sends 1,000 rows a request) never reaches 5,000 in
   * one request: there the table's own counters decide (contactStatisticsStale), looked at every
   * 1,000 rows and at the end. On PGlite the sample is smaller (analyzeContacts), as ANALYZE runs
   * on the event loop there.
   */
  async freshenStatistics(atEnd: boolean): Promise<void> {
    const look = this.#unchecked >= BATCH || (atEnd && this.#unchecked > 0);
    if (look) {
      this.#unchecked = 0;
      await this.#oneConnection?.quiet();
    }
    if (this.result.created >= this.#nextAnalyze || (look && (await contactStatisticsStale(this.#db, BATCH)))) {
      await this.#oneConnection?.quiet();
      await analyzeContacts(this.#db, { quick: this.#oneConnection !== undefined });
      while (this.#nextAnalyze <= this.result.created) this.#nextAnalyze *= 2;
    }
  }
}

/** One row checked like a contact body, and against the rows before it; its errors otherwise. */
function checkRow(
  line: number,
  body: Record<string, unknown>,
  check: RowCheck,
  extraTags: string[],
  firstLineOf: Map<string, number>,
  now: Date,
): Checked | { line: number; errors: FieldErrors } {
  const errors = rowErrors(body, check);
  if (errors) return { line, errors };
  let changes: ReturnType<typeof contactChanges>;
  try {
    changes = contactChanges(body as ContactInput, now);
  } catch (error) {
    if (error instanceof DomainError && error.errors) return { line, errors: error.errors };
    throw error;
  }
  const key = matchKey(changes.fields);
  const earlier = key && firstLineOf.get(key);
  if (earlier) {
    const field = key.startsWith('email:') ? 'email' : 'phone';
    return { line, errors: { [field]: [`is already on line ${earlier}; a file names each contact once`] } };
  }
  if (key) firstLineOf.set(key, line);
  const present = (Object.keys(changes.fields) as (keyof ContactFields)[]).filter((name) => name in body);
  return { line, fields: changes.fields, present, tags: [...(changes.tags ?? []), ...extraTags] };
}

function rowErrors(body: Record<string, unknown>, check: RowCheck): FieldErrors | undefined {
  const errors: FieldErrors = {};
  if ('' in body) errors.row = ['has more values than the header names, or is not a JSON object'];
  // NUL, a lone surrogate or a value nested past any contact body: what the database cannot store.
  const problem = jsonTextProblem(body);
  if (problem) errors.row = [...(errors.row ?? []), problem];
  if (errors.row) return errors;
  return check(body);
}

function matchKey(fields: ContactFields): string | undefined {
  if (fields.email) return `email:${fields.email.toLowerCase()}`;
  if (fields.phone) return `phone:${fields.phone}`;
  return undefined;
}

/**
 * One batch in one transaction: find the matches, one INSERT, one UPDATE, the tags, the links. The
 * unique index on live addresses (migration 0021) has the last word: a row whose address a contact
 * created meanwhile took (by the API, which does not wait for imports) is not inserted but matched
 * to that contact and updates it, as if it had been there from the start.
 */
async function writeBatch(
  db: Db,
  userId: number,
  rows: Checked[],
  now: Date,
): Promise<{ created: number; updated: number; refused: ImportResult['refused'] }> {
  return db.transaction().execute(async (trx) => {
    // Two imports for one user take turns, so neither creates a contact the other is creating
    // (phone numbers have no unique index; addresses have, and it refuses the second anyway).
    await sql`SELECT pg_advisory_xact_lock(${IMPORT_LOCK}, ${userId})`.execute(trx);
    const ids = await matchExisting(trx, userId, rows);
    const refused = await overPersonsWord(trx, userId, rows, ids);
    const lines = new Set(refused.map((r) => r.line));
    const batch = lines.size === 0 ? rows : rows.filter((row) => !lines.has(row.line));
    const created = new Set<Checked>();
    let pending = batch.filter((row) => !ids.has(row));
    for (let attempt = 1; pending.length > 0; attempt++) {
      const taken = await insertRows(trx, userId, pending, now, ids);
      const left = new Set(taken);
      for (const row of pending) if (!left.has(row)) created.add(row);
      if (taken.length === 0) break;
      for (const [row, id] of await matchExisting(trx, userId, taken)) ids.set(row, id);
      // Still unmatched: the contact that held the address left it meanwhile; insert them again.
      pending = taken.filter((row) => !ids.has(row));
      if (pending.length > 0 && attempt === 3) {
        throw addressFreedMeanwhile(pending[0]?.fields.email);
      }
    }
    const updates = batch.filter((row) => !created.has(row));
    await updateMatched(trx, userId, updates, ids, now);
    await linkTags(trx, userId, batch, ids, now);
    return { created: created.size, updated: updates.length, refused };
  });
}

/**
 * The rows that would change the person's own word (docs/decisions.md): a status other than the
 * one a matched contact's person gave, or, for a row that matches no contact, the one its address's
 * person gave. Each is refused with why; a row without a status takes the person's word (the
 * contacts' triggers, migration 0039), and the rest of the batch is written.
 */
async function overPersonsWord(trx: Db, userId: number, rows: Checked[], ids: Map<Checked, number>): Promise<ImportResult['refused']> {
  const setting = rows.filter((row) => row.present.includes('status'));
  if (setting.length === 0) return [];
  const matched = setting.filter((row) => ids.has(row)).map((row) => ids.get(row) as number);
  const addresses = setting.filter((row) => !ids.has(row) && row.fields.email).map((row) => row.fields.email as string);
  const { ofContact, ofEmail } = await personsWordOf(trx, userId, matched, addresses);
  const refused: ImportResult['refused'] = [];
  for (const row of setting) {
    const id = ids.get(row);
    const word = id !== undefined ? ofContact.get(id) : row.fields.email ? ofEmail.get(row.fields.email.toLowerCase()) : undefined;
    const errors = word && personsWordErrors(word, row.fields.status ?? 'Subscribed');
    if (errors) refused.push({ line: row.line, errors });
  }
  return refused;
}

/**
 * The live contact each row matches, if any: by email in any case (the contact holding the
 * address, in the unique index of migration 0021), or, for a row without one, by phone (migration
 * 0014's index).
 */
async function matchExisting(trx: Db, userId: number, rows: Checked[]): Promise<Map<Checked, number>> {
  const emails = rows.map((row) => row.fields.email).filter((email): email is string => Boolean(email));
  const phones = rows.filter((row) => !row.fields.email && row.fields.phone).map((row) => row.fields.phone as string);
  const existing = new Map<string, number>();
  const keep = (key: string, id: number) => {
    const known = existing.get(key);
    if (known === undefined || id < known) existing.set(key, id);
  };
  if (emails.length > 0) {
    for (const row of await contactsHoldingEmails(trx, userId, emails)) keep(`email:${row.email.toLowerCase()}`, row.id);
  }
  if (phones.length > 0) {
    for (const row of await contactsWithPhonesOnly(trx, userId, phones)) keep(`phone:${row.phone}`, row.id);
  }
  const ids = new Map<Checked, number>();
  for (const row of rows) {
    const id = existing.get(matchKey(row.fields) ?? '');
    if (id !== undefined) ids.set(row, id);
  }
  return ids;
}

/**
 * Inserts the rows in one statement over arrays (a handful of parameters, not thousands), their ids
 * into `ids`; answers the rows not inserted because a live contact holds their address.
 */
async function insertRows(trx: Db, userId: number, rows: Checked[], now: Date, ids: Map<Checked, number>): Promise<Checked[]> {
  const inserted = await insertContactRows(
    trx,
    userId,
    rows.map((row) => row.fields),
    now,
  );
  // Identity values are drawn in the order the rows are inserted, which is the array order (a row
  // left out draws one too): the inserted rows, in order, take the ids in order. A row without an
  // email is always inserted; one with an email is if its email came back (a file names each
  // address once).
  const insertedEmails = new Set(inserted.map((row) => row.email));
  const newIds = inserted.map((row) => row.id).sort((x, y) => x - y);
  const taken: Checked[] = [];
  let next = 0;
  for (const row of rows) {
    if (row.fields.email && !insertedEmails.has(row.fields.email)) taken.push(row);
    else ids.set(row, newIds[next++] as number);
  }
  if (next !== newIds.length) throw new Error(`import: ${newIds.length} contacts inserted, ${next} rows matched to them`);
  return taken;
}

const IMPORT_LOCK = 14_001;
// Not the email: a row matched by it keeps the stored one (the file may spell it in another case),
// and a row matched by its phone has none.
const UPDATABLE = ['first_name', 'last_name', 'phone', 'time_zone', 'status'] as const;

/** One UPDATE … FROM unnest(…) per set of columns present (a CSV has one). */
async function updateMatched(trx: Db, userId: number, rows: Checked[], ids: Map<Checked, number>, now: Date): Promise<void> {
  const groups = new Map<string, Checked[]>();
  for (const row of rows) {
    const key = UPDATABLE.filter((column) => row.present.includes(column)).join(',');
    const group = groups.get(key);
    if (group) group.push(row);
    else groups.set(key, [row]);
  }
  for (const [key, group] of groups) {
    const columns = key === '' ? [] : (key.split(',') as (typeof UPDATABLE)[number][]);
    await updateContactColumns(
      trx,
      userId,
      group.map((row) => ({ id: ids.get(row) as number, fields: row.fields })),
      columns,
      now,
    );
  }
}

/** Adds each row's tags (never removes one): the names made once, the links in one insert. */
async function linkTags(trx: Db, userId: number, rows: Checked[], ids: Map<Checked, number>, now: Date): Promise<void> {
  const names = new Map<string, string>();
  for (const row of rows) for (const tag of row.tags) if (!names.has(tagKey(tag))) names.set(tagKey(tag), tag.trim());
  if (names.size === 0) return;
  const tags = await ensureTags(trx, userId, [...names.values()], now);
  const tagIds = new Map(tags.map((tag) => [tagKey(tag.name), tag.id]));
  const links = new Map<string, { contact_id: number; tag_id: number }>();
  for (const row of rows) {
    const contactId = ids.get(row) as number;
    for (const tag of row.tags) {
      const tagId = tagIds.get(tagKey(tag));
      if (tagId !== undefined) links.set(`${contactId}:${tagId}`, { contact_id: contactId, tag_id: tagId });
    }
  }
  await linkContactTags(trx, userId, [...links.values()]);
}
