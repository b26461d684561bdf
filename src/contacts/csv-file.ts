import { isUtf8 } from 'node:buffer';
import { setImmediate } from 'node:timers/promises';
import { DomainError } from '../errors.ts';

/**
 * CSV files as people export them (docs/contacts.md, "Bulk import"): the bytes decoded by the
 * charset the request names or, without one, by what they are (UTF-8 with or without a BOM,
 * UTF-16 with a BOM or by its zero bytes, else Windows-1252, the "ANSI" of Excel and Outlook on
 * Windows), never with a silent U+FFFD; the separator sniffed from the header row (`,` `;` tab,
 * or Excel's `sep=` line); and the columns of Google Contacts, Outlook, Apple Contacts and
 * ordinary spreadsheets mapped to contact fields by their names, case, spacing and punctuation
 * ignored, or by an explicit mapping.
 */

export const CONTACT_COLUMNS = ['first_name', 'last_name', 'email', 'phone', 'time_zone', 'status', 'tags'] as const;
export type ContactColumn = (typeof CONTACT_COLUMNS)[number];

/** Bytes Windows-1252 leaves undefined: a file holding them is in some other encoding. */
const UNDEFINED_IN_1252 = new Set([0x81, 0x8d, 0x8f, 0x90, 0x9d]);

/**
 * How many bytes are decoded, then parsed and read into rows, in one turn of the event loop: some
 * 2–5 ms of work, so that a 20 MB file (some 320 slices) never keeps other requests waiting
 * (docs/contacts.md, "Bulk import").
 */
const SLICE_BYTES = 64 * 1024;

/** A file's text, decoded strictly in slices, one turn of the event loop after another. */
export interface FileText {
  /** The WHATWG name of the encoding the bytes are read as. */
  encoding: string;
  slices: AsyncGenerator<string>;
}

/** A label of the WHATWG Encoding Standard as TextDecoder knows it, or undefined for one it does not. */
export function knownCharset(label: string): string | undefined {
  try {
    return new TextDecoder(label).encoding;
  } catch {
    return undefined;
  }
}

/**
 * The file's text. `charset` is the Content-Type's parameter, already checked by `knownCharset`;
 * bytes it cannot decode refuse the file with the line they are on, when the slice holding them
 * is reached (an import reads the whole file before it writes anything).
 */
export function readText(bytes: Uint8Array, charset?: string): FileText {
  const { label, why } = encodingOf(bytes, charset);
  return { encoding: new TextDecoder(label).encoding, slices: decodeStrictly(bytes, label, why) };
}

function encodingOf(bytes: Uint8Array, charset: string | undefined): { label: string; why: string } {
  if (charset) return { label: charset, why: 'the charset the request names' };
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return { label: 'utf-8', why: 'its byte order mark' };
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return { label: 'utf-16le', why: 'its byte order mark' };
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return { label: 'utf-16be', why: 'its byte order mark' };
  const utf16 = utf16ByZeros(bytes);
  if (utf16) return { label: utf16, why: 'its zero bytes' };
  if (isUtf8(bytes)) return { label: 'utf-8', why: 'its bytes' };
  // The first byte Windows-1252 cannot hold, found by the native search (a loop over 20 MB in
  // JavaScript takes some 100 ms of the event loop).
  const odd = Math.min(...[0, ...UNDEFINED_IN_1252].map((byte) => bytes.indexOf(byte)).filter((at) => at !== -1));
  if (odd !== Infinity) {
    throw new DomainError(
      'bad_request',
      `The file is neither UTF-8 nor Windows-1252: byte 0x${hex(bytes[odd])} on line ${lineAt(bytes, odd)} is in neither. ` +
        'Save it as "CSV UTF-8", or name its encoding in the Content-Type (text/csv; charset=…).',
    );
  }
  return { label: 'windows-1252', why: 'its bytes' };
}

async function* decodeStrictly(bytes: Uint8Array, label: string, why: string): AsyncGenerator<string> {
  const decoder = new TextDecoder(label, { fatal: true });
  for (let at = 0; at < bytes.length; at += SLICE_BYTES) {
    const end = Math.min(at + SLICE_BYTES, bytes.length);
    let text: string;
    try {
      text = decoder.decode(bytes.subarray(at, end), { stream: end < bytes.length });
    } catch {
      const line = await lineOfFirstReplacement(bytes, label, end);
      throw new DomainError(
        'bad_request',
        `The file is not ${decoder.encoding} as ${why} says: line ${line} holds bytes that are not ${decoder.encoding}. ` +
          'Save it again in that encoding, or name the encoding it is in (text/csv; charset=…).',
      );
    }
    yield text;
    await setImmediate();
  }
}

/**
 * Where decoding went wrong: the line of the first character the forgiving decoder had to replace,
 * read from the start (a slice alone may begin inside a character), in slices too.
 */
async function lineOfFirstReplacement(bytes: Uint8Array, label: string, end: number): Promise<number> {
  const decoder = new TextDecoder(label);
  let line = 1;
  for (let at = 0; at < end; at += SLICE_BYTES) {
    const text = decoder.decode(bytes.subarray(at, Math.min(at + SLICE_BYTES, end)), { stream: true });
    const bad = text.indexOf('\uFFFD');
    line += newlines(text, bad === -1 ? text.length : bad);
    if (bad !== -1) break;
    await setImmediate();
  }
  return line;
}

function newlines(text: string, end: number): number {
  let count = 0;
  for (let at = text.indexOf('\n'); at !== -1 && at < end; at = text.indexOf('\n', at + 1)) count++;
  return count;
}

/** UTF-16 without a byte order mark: ASCII text in it has every other byte zero. */
function utf16ByZeros(bytes: Uint8Array): 'utf-16le' | 'utf-16be' | undefined {
  const sample = Math.min(bytes.length - (bytes.length % 2), 4096);
  if (sample < 4) return undefined;
  let evenZeros = 0;
  let oddZeros = 0;
  for (let i = 0; i < sample; i += 2) {
    if (bytes[i] === 0) evenZeros++;
    if (bytes[i + 1] === 0) oddZeros++;
  }
  const pairs = sample / 2;
  if (oddZeros > pairs * 0.4 && evenZeros === 0) return 'utf-16le';
  if (evenZeros > pairs * 0.4 && oddZeros === 0) return 'utf-16be';
  return undefined;
}

function hex(byte: number | undefined): string {
  return (byte ?? 0).toString(16).toUpperCase().padStart(2, '0');
}

function lineAt(bytes: Uint8Array, offset: number): number {
  let line = 1;
  for (let at = bytes.indexOf(0x0a); at !== -1 && at < offset; at = bytes.indexOf(0x0a, at + 1)) line++;
  return line;
}

export type Separator = ',' | ';' | '\t';

/**
 * The separator and the line the header is on: Excel's `sep=;` first line says it; otherwise the
 * one of `,` `;` tab found most often in the header row outside quotes (a comma when none is).
 */
export function sniffSeparator(text: string): { separator: Separator; headerLine: number } {
  const start = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  const hint = /^sep=([,;\t])\r?\n/i.exec(text.slice(start, start + 8));
  if (hint) return { separator: hint[1] as Separator, headerLine: 2 };
  const counts = { ',': 0, ';': 0, '\t': 0 };
  let quoted = false;
  for (let i = start; i < text.length; i++) {
    const char = text[i];
    if (char === '"') quoted = !quoted;
    else if (!quoted && (char === '\n' || char === '\r')) break;
    else if (!quoted && (char === ',' || char === ';' || char === '\t')) counts[char]++;
  }
  const separator = (['\t', ';', ','] as const).reduce((best, candidate) => (counts[candidate] > counts[best] ? candidate : best), ',');
  return { separator, headerLine: 1 };
}

/** A column name as compared: lower case, letters and digits only ("E-mail 1 - Value" is `email1value`). */
function columnKey(name: string): string {
  return name
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, '');
}

/**
 * The names each field goes by in exports, in the order they are preferred when a file has several
 * (a row takes its phone from the first of its phone columns that is not empty).
 */
const ALIASES: Record<ContactColumn, string[]> = {
  first_name: ['first_name', 'First Name', 'Given Name', 'First', 'Forename'],
  last_name: ['last_name', 'Last Name', 'Family Name', 'Surname', 'Last'],
  email: [
    'email',
    'Email Address',
    'E-mail 1 - Value',
    'E-mail Address',
    'Email 1',
    'Primary Email',
    'Home Email',
    'Work Email',
    'Other Email',
    'Email (home)',
    'Email (work)',
    'Email (other)',
    'Mail',
  ],
  phone: [
    'phone',
    'Phone Number',
    'Mobile',
    'Mobile Phone',
    'Mobile Number',
    'Cell',
    'Cell Phone',
    'iPhone',
    'Phone 1 - Value',
    'Primary Phone',
    'Home Phone',
    'Work Phone',
    'Business Phone',
    'Other Phone',
    'Phone (mobile)',
    'Phone (iPhone)',
    'Phone (main)',
    'Phone (home)',
    'Phone (work)',
    'Telephone',
    'Tel',
  ],
  time_zone: ['time_zone', 'Timezone', 'TZ'],
  status: ['status'],
  tags: ['tags', 'Tag', 'Labels', 'Group Membership', 'Categories', 'Groups'],
};
const FIELD_BY_KEY = new Map<string, ContactColumn>();
const PREFERENCE = new Map<string, number>();
for (const field of CONTACT_COLUMNS) {
  for (const [i, alias] of ALIASES[field].entries()) {
    FIELD_BY_KEY.set(columnKey(alias), field);
    PREFERENCE.set(columnKey(alias), i);
  }
}

/**
 * Google's columns hold several values joined by ` ::: ` (two numbers of one label, several
 * labels); its labels starting with `* ` are its own groups (`* myContacts`, `* starred`).
 */
const GOOGLE_SPLIT = ' ::: ';
const GOOGLE_TAG_COLUMNS = new Set(['labels', 'groupmembership']);

/** The explicit mapping: column key → the name as given and its field. */
export type Mapping = Map<string, { name: string; field: ContactColumn | 'ignore' }>;

/** How the columns are read: for each field, its columns by preference; the rest ignored. */
interface ColumnMap {
  /** Column index → field, for the answer: the header's own names. */
  fields: { column: number; field: ContactColumn; tagSeparator?: string }[];
  /** Header names that map to no field. */
  ignored: string[];
}

/**
 * Maps the header row. `explicit` (the request's `column=NAME:field`, NAME as in the header in any
 * case and spacing, field a contact field or `ignore`) comes first; then the aliases. Two columns
 * of one name, or an explicit name that is not in the header, refuse the file.
 */
export function mapColumns(header: string[], explicit: Mapping): ColumnMap {
  const keys = header.map(columnKey);
  const fieldOf = (key: string) => fieldOfKey(key, explicit);
  const errors: string[] = [];
  for (const [key, { name }] of explicit) {
    if (!keys.includes(key)) errors.push(`the mapping names the column "${name}", which the header does not have`);
  }
  const repeated = [...new Set(keys.filter((key, i) => fieldOf(key) && keys.indexOf(key) !== i))];
  if (repeated.length > 0) {
    const names = repeated.map((key) => header[keys.indexOf(key)]);
    errors.push(`repeated columns: ${names.join(', ')} (name each field once, or map one of them with ?column=NAME:ignore)`);
  }
  if (errors.length > 0) throw new DomainError('validation', 'The CSV header cannot be read as contact fields.', { header: errors });
  const byField = new Map<ContactColumn, { column: number; preference: number; explicit: boolean }[]>();
  const ignored: string[] = [];
  keys.forEach((key, column) => {
    const field = fieldOf(key);
    if (!field) {
      ignored.push(header[column] as string);
      return;
    }
    const isExplicit = explicit.has(key);
    const list = byField.get(field) ?? [];
    list.push({ column, preference: isExplicit ? -1 : (PREFERENCE.get(key) ?? 0), explicit: isExplicit });
    byField.set(field, list);
  });
  if (byField.size === 0) {
    throw new DomainError('validation', 'The CSV header names no contact field.', {
      header: [
        `none of its columns (${header.join(', ')}) is one of ${CONTACT_COLUMNS.join(', ')} or a name they go by; ` +
          'map them with ?column=NAME:field',
      ],
    });
  }
  const fields: ColumnMap['fields'] = [];
  for (const [field, columns] of byField) {
    // An explicit mapping for a field replaces its aliases; the tag columns are all read.
    const chosen = columns.some((c) => c.explicit) ? columns.filter((c) => c.explicit) : columns;
    chosen.sort((a, b) => a.preference - b.preference || a.column - b.column);
    for (const { column } of chosen) {
      const tagSeparator = field === 'tags' ? (GOOGLE_TAG_COLUMNS.has(keys[column] as string) ? GOOGLE_SPLIT : ';') : undefined;
      fields.push({ column, field, tagSeparator });
    }
  }
  return { fields, ignored };
}

/** The field a column of this key goes to by the explicit mapping, else by its name; undefined for none. */
function fieldOfKey(key: string, explicit: Mapping): ContactColumn | undefined {
  const chosen = explicit.get(key)?.field;
  return chosen === 'ignore' ? undefined : (chosen ?? FIELD_BY_KEY.get(key));
}

/**
 * Each header column's field as an import with this mapping reads it (undefined: ignored, or left
 * out by an explicit mapping of its field), with `map` to read rows by; or, for a header that
 * cannot be read so, the fields its columns' names and the mapping give, and why (`mapColumns`).
 */
export function columnFields(
  header: string[],
  explicit: Mapping,
): { fields: (ContactColumn | undefined)[]; map?: ColumnMap; errors: string[] } {
  try {
    const map = mapColumns(header, explicit);
    const fields: (ContactColumn | undefined)[] = header.map(() => undefined);
    for (const { column, field } of map.fields) fields[column] = field;
    return { fields, map, errors: [] };
  } catch (error) {
    if (!(error instanceof DomainError) || !error.errors?.header) throw error;
    return { fields: header.map((name) => fieldOfKey(columnKey(name), explicit)), errors: error.errors.header };
  }
}

/** One row's body from its cells: empty cells leave their field out. */
export function rowBody(record: string[], map: ColumnMap): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const { column, field, tagSeparator } of map.fields) {
    const value = record[column]?.trim();
    if (!value) continue;
    if (tagSeparator) {
      const tags = value
        .split(tagSeparator)
        .map((tag) => tag.trim())
        .filter((tag) => tag !== '' && !(tagSeparator === GOOGLE_SPLIT && tag.startsWith('* ')));
      if (tags.length > 0) body.tags = body.tags ? [...(body.tags as string[]), ...tags] : tags;
    } else if (!(field in body)) {
      // Google joins two numbers of one label with ` ::: `: the first is taken.
      const several = (field === 'email' || field === 'phone') && value.indexOf(GOOGLE_SPLIT);
      body[field] = several !== false && several > 0 ? value.slice(0, several).trim() : value;
    }
  }
  return body;
}

/** The request's `column` parameters, `NAME:field`, read into a map (field errors for bad ones). */
export function readMapping(values: string[]): Mapping {
  const map: Mapping = new Map();
  const errors: string[] = [];
  for (const value of values) {
    const at = value.lastIndexOf(':');
    const name = columnKey(at === -1 ? '' : value.slice(0, at));
    const field = value.slice(at + 1).trim();
    if (at === -1 || name === '') {
      errors.push(`"${value}" is not NAME:field (e.g. column=Handy:phone)`);
    } else if (field !== 'ignore' && !(CONTACT_COLUMNS as readonly string[]).includes(field)) {
      errors.push(`"${value}" maps to "${field}", which is not one of ${CONTACT_COLUMNS.join(', ')}, ignore`);
    } else if (map.has(name)) {
      errors.push(`"${value}" maps a column the mapping already maps`);
    } else {
      map.set(name, { name: value.slice(0, at).trim(), field: field as ContactColumn | 'ignore' });
    }
  }
  if (errors.length > 0) {
    throw new DomainError(
      'validation',
      errors.length === 1 ? `The column parameter ${errors[0]}.` : 'The column parameters are not NAME:field mappings.',
      { column: errors },
    );
  }
  return map;
}
