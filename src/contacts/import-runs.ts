import type { Db } from '../db/database.ts';
import type { OneConnection } from '../db/one-connection.ts';
import { findOwnedRow } from '../db/owned-rows.ts';
import type { RefusedImportRow } from '../db/schema.ts';
import { DomainError, type FieldErrors } from '../errors.ts';
import { realTimeMs } from '../time.ts';
import { CONTACT_COLUMNS, type ContactColumn, columnFields, readMapping, readText, rowBody } from './csv-file.ts';
import { importContacts, previewCsv, readCsv } from './import.ts';

/**
 * A contact import in steps, as the browser's /contacts/import takes it: the file is uploaded and
 * kept (table `contact_imports`, so that any API process serves the next step), read as the
 * API's import reads it for a preview of its column mapping, which the person may change; then
 * imported by the API's own `importContacts`, its progress recorded batch by batch, and at the end
 * its counts and the rows refused with why. The file is dropped once imported; an import is kept
 * for IMPORT_KEPT_DAYS.
 */

/** The first rows a preview shows. */
const SAMPLE_ROWS = 5;
const IMPORT_KEPT_DAYS = 7;
/**
 * An import whose progress has not moved for this long stopped with its process (a restart): it
 * may be started again, which is safe, as importing a file again creates nothing twice.
 */
const IMPORT_STALLED_MS = 2 * 60_000;

/** How often a running import records how far it has come. */
const PROGRESS_EVERY_MS = 1000;

/** A field a column may be mapped to, or none. */
export type ColumnChoice = ContactColumn | 'ignore';
export const COLUMN_CHOICES: readonly ColumnChoice[] = [...CONTACT_COLUMNS, 'ignore'];

/** Every column but the file's bytes. */
const COLUMNS = [
  'id',
  'user_id',
  'file_name',
  'encoding',
  'separator',
  'header',
  'sample',
  'row_count',
  'mapping',
  'state',
  'rows_done',
  'created',
  'updated',
  'refused',
  'error',
  'created_at',
  'updated_at',
] as const;

/** Checks a row's body as the API's contact body (the HTTP layer's wording). */
type RowCheck = (body: Record<string, unknown>) => FieldErrors | undefined;

/**
 * Reads the file as an import would (its encoding, separator, header and rows, within the API's
 * limits) and keeps it for `userId`; refused (DomainError) when it cannot be read. Imports older
 * than IMPORT_KEPT_DAYS of that user go.
 */
export async function stageImport(db: Db, userId: number, fileName: string, bytes: Buffer, now: Date): Promise<number> {
  const preview = await previewCsv(readText(bytes), SAMPLE_ROWS);
  await db
    .deleteFrom('contact_imports')
    .where('user_id', '=', userId)
    .where('created_at', '<', new Date(now.getTime() - IMPORT_KEPT_DAYS * 86_400_000))
    .where('state', '!=', 'importing')
    .execute();
  const { id } = await db
    .insertInto('contact_imports')
    .values({
      user_id: userId,
      file_name: fileName,
      file: bytes,
      encoding: preview.encoding,
      separator: preview.separator,
      header: JSON.stringify(preview.header),
      sample: JSON.stringify(preview.sample),
      row_count: preview.rows,
      mapping: '[]',
      state: 'staged',
      created_at: now,
      updated_at: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return id;
}

/** An import with its owner (for the access rule), without the file's bytes. */
export function findImport(db: Db, id: number) {
  return findOwnedRow(db, db.selectFrom('contact_imports').select(COLUMNS).where('id', '=', id));
}
type ContactImport = NonNullable<Awaited<ReturnType<typeof findImport>>>['row'];

/** The user's imports, newest first. */
export function recentImports(db: Db, userId: number, limit: number) {
  return db
    .selectFrom('contact_imports')
    .select(['id', 'file_name', 'state', 'row_count', 'created', 'updated', 'created_at'])
    .where('user_id', '=', userId)
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
}

function mappingOf(row: Pick<ContactImport, 'mapping'>) {
  return readMapping(row.mapping.map(({ name, field }) => `${name}:${field}`));
}

/**
 * The preview: each column with the field the import takes it to (none: ignored), why the header
 * cannot be imported as mapped (if it cannot), and the first rows as the contact bodies they
 * become.
 */
export function importPreview(row: Pick<ContactImport, 'header' | 'sample' | 'mapping'>) {
  const { fields, map, errors } = columnFields(row.header, mappingOf(row));
  return {
    columns: row.header.map((name, i) => ({
      name,
      field: fields[i] ?? ('ignore' as const),
      examples: row.sample.map((s) => s.cells[i] ?? ''),
    })),
    errors,
    sample: map ? row.sample.map((s) => ({ line: s.line, body: rowBody(s.cells, map) })) : [],
  };
}

/**
 * The person's choice of field for each column (by position), kept as the API's explicit
 * `column=NAME:field` mapping: a column whose choice differs from what its name gives, and every
 * column chosen for a field that such a column was chosen for (an explicit mapping of a field
 * replaces the names it goes by, so the columns the person left on it stay on it).
 */
export async function chooseColumns(db: Db, row: ContactImport, choices: ColumnChoice[], now: Date): Promise<void> {
  if (row.state !== 'staged') throw new DomainError('conflict', `Contact import ${row.id} has started; its columns cannot change.`);
  const byName = columnFields(row.header, new Map()).fields;
  const chosen = row.header.map((_, i) => choices[i] ?? byName[i] ?? 'ignore');
  const changed = chosen.map((choice, i) => choice !== (byName[i] ?? 'ignore'));
  const touched = new Set(chosen.filter((choice, i) => changed[i] && choice !== 'ignore'));
  const mapping = row.header
    .map((name, i) => ({ name, field: chosen[i] as ColumnChoice, explicit: changed[i] || touched.has(chosen[i] as ColumnChoice) }))
    .filter(({ name, explicit }) => explicit && name.trim() !== '')
    .map(({ name, field }) => ({ name, field }));
  // The API's reading of it: the same refusals (a column named twice) as its `column` parameter.
  readMapping(mapping.map(({ name, field }) => `${name}:${field}`));
  await db
    .updateTable('contact_imports')
    .set({ mapping: JSON.stringify(mapping), updated_at: now })
    .where('id', '=', row.id)
    .where('state', '=', 'staged')
    .execute();
}

/**
 * Marks a staged import (or one that stalled) as importing; false when it already is or is done
 * (a second press of Import). Refused while its header cannot be imported as mapped.
 */
export async function startImport(db: Db, row: ContactImport, now: Date): Promise<boolean> {
  const { errors } = importPreview(row);
  if (errors.length > 0) throw new DomainError('validation', 'The columns cannot be imported as mapped.', { columns: errors });
  const stalled = new Date(now.getTime() - IMPORT_STALLED_MS);
  const started = await db
    .updateTable('contact_imports')
    .set({ state: 'importing', rows_done: 0, updated_at: now })
    .where('id', '=', row.id)
    .where('file', 'is not', null)
    .where((eb) => eb.or([eb('state', '=', 'staged'), eb.and([eb('state', '=', 'importing'), eb('updated_at', '<', stalled)])]))
    .returning('id')
    .executeTakeFirst();
  return started !== undefined;
}

/**
 * Runs a started import to its end: the kept file read with its mapping and imported by
 * `importContacts` (the API's, with its row check), the rows done recorded as batches are written; then
 * the counts and the refused rows (line, field, the value there, the API's words), the file
 * dropped. A file that cannot be imported ends the import as failed, with why.
 */
export async function runImport(
  db: Db,
  id: number,
  check: RowCheck,
  clock: () => Date,
  options: { oneConnection: OneConnection | undefined },
): Promise<void> {
  const kept = await db.selectFrom('contact_imports').select(['user_id', 'file', 'mapping']).where('id', '=', id).executeTakeFirstOrThrow();
  try {
    if (!kept.file) throw new DomainError('conflict', 'The file of this import is no longer kept; upload it again.');
    const { rows } = await readCsv(readText(kept.file), mappingOf(kept));
    // Recorded once a second at most: on PGlite every statement waits for the one connection.
    let recorded = realTimeMs();
    const progress = async (done: number) => {
      if (realTimeMs() - recorded < PROGRESS_EVERY_MS) return;
      recorded = realTimeMs();
      await db.updateTable('contact_imports').set({ rows_done: done, updated_at: clock() }).where('id', '=', id).execute();
    };
    const result = await importContacts(db, kept.user_id, rows, check, [], clock(), { ...options, progress });
    const bodies = new Map(rows.map((row) => [row.line, row.body]));
    const refused: RefusedImportRow[] = result.refused.flatMap(({ line, errors }) =>
      Object.entries(errors).flatMap(([field, messages]) =>
        messages.map((message) => ({ line, field, value: valueAt(bodies.get(line), field), message })),
      ),
    );
    await db
      .updateTable('contact_imports')
      .set({
        state: 'done',
        rows_done: rows.length,
        created: result.created,
        updated: result.updated,
        refused: JSON.stringify(refused),
        file: null,
        updated_at: clock(),
      })
      .where('id', '=', id)
      .execute();
  } catch (error) {
    const why = error instanceof DomainError ? error.message : 'The import stopped on an error on our side.';
    await db.updateTable('contact_imports').set({ state: 'failed', error: why, updated_at: clock() }).where('id', '=', id).execute();
    if (!(error instanceof DomainError)) throw error;
  }
}

/** The value a refused field had in its row (`tags.1`: the second tag), as text. */
function valueAt(body: Record<string, unknown> | undefined, field: string): string {
  let value: unknown = body;
  for (const step of field.split('.')) value = value && typeof value === 'object' ? (value as Record<string, unknown>)[step] : undefined;
  if (field === 'row') value = body?.[''];
  if (Array.isArray(value)) return value.map(String).join('; ');
  return value === undefined || value === null ? '' : String(value);
}

/** How far an import has come, for its page: a stalled one says so, and may be started again. */
export function importProgress(row: Pick<ContactImport, 'state' | 'rows_done' | 'row_count' | 'updated_at'>, now: Date) {
  const stalled = row.state === 'importing' && now.getTime() - row.updated_at.getTime() > IMPORT_STALLED_MS;
  const percent = row.row_count === 0 ? 100 : Math.min(100, Math.floor((row.rows_done / row.row_count) * 100));
  return { stalled, percent };
}
