import {
  type AliasableExpression,
  type Expression,
  type RawBuilder,
  type SelectExpression,
  type SelectQueryBuilder,
  type SqlBool,
  sql,
} from 'kysely';
import type { Db } from './database.ts';

/**
 * Search on a collection, as the specification and docs/contacts.md ("Search") describe it: query parameters
 * named after scalar fields are filters, all OR-ed together (several parameters, or one repeated);
 * `page` and `per_page` select the page; rows come in `id` order. The HTTP layer (http/paging.ts)
 * reads the parameters and wraps the result in the Laravel-style envelope.
 */
export type FilterSpec =
  | { kind: 'id'; column: string }
  | { kind: 'enum'; column: string; values: readonly string[] }
  | { kind: 'text'; column: string }
  | { kind: 'exact'; column: string };
export type Filters = Record<string, FilterSpec>;

export const DEFAULT_PER_PAGE = 15;
export const MAX_PER_PAGE = 100;

/** A select of any table (a search runs on every collection). */
// biome-ignore lint/suspicious/noExplicitAny: any table
type AnySelect<Row> = SelectQueryBuilder<any, any, Row>;

export type SearchParams = { page?: number; per_page?: number } & Record<string, unknown>;

/** One page of a search: its rows, where it sits, and how many rows match in all. */
export interface SearchResult<Row> {
  rows: Row[];
  page: number;
  perPage: number;
  total: number;
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** One condition of a search: `column = value` or `column ILIKE '%value%'`, and what names it. */
interface Term {
  name: string;
  value: unknown;
  condition: Expression<SqlBool>;
  text: boolean;
}

function filterTerms(filters: Filters, params: SearchParams): Term[] {
  const terms: Term[] = [];
  for (const [name, spec] of Object.entries(filters)) {
    const values = params[name] as unknown[] | undefined;
    for (const value of values ?? []) {
      const text = spec.kind === 'text';
      const condition = text
        ? sql<SqlBool>`${sql.ref(spec.column)} ILIKE ${`%${escapeLike(String(value))}%`}`
        : sql<SqlBool>`${sql.ref(spec.column)} = ${value}`;
      terms.push({ name, value, condition, text });
    }
  }
  return terms;
}

/** Columns a search adds to its page's rows (the total, or the version and counted parts), taken off again. */
const META = 'search__';

/**
 * One disjoint part of a count: its rows, the key its total is kept under, and, when the database
 * keeps that count itself, the expression that reads it.
 */
interface CountPart {
  key: string;
  condition: Expression<SqlBool>;
  kept?: AliasableExpression<unknown>;
}

/**
 * Runs a filtered, paged search in one statement: the page's rows, and riding on them as
 * uncorrelated sub-selects (each planned on its own, run once) what the total needs. A
 * `count(*) OVER ()` on the page would instead make it read every matching row (85 ms for a user
 * with 100,000 contacts on PostgreSQL), while the page alone reads `per_page` index entries and
 * the count is an index-only scan (25 ms). As few statements as possible: each costs the API
 * process and PostgreSQL a round trip of their own, which under load costs more than the work of
 * a search (docs/performance.md).
 *
 * Options: `counts` reuses totals while the rows searched are unchanged (see CountCache): only the
 * parts of the total not yet known are counted, with the collection's version read in the same
 * statement; `rowsByIds` makes the page two statements: `query` (a plain table, quick to plan)
 * finds the page's ids with the totals, and `rowsByIds` reads those rows with whatever they join
 * (one statement whose text never changes, so PostgreSQL plans it once per connection);
 * `owner` narrows the search to one owner's rows (see ownedRows).
 */
export async function runSearch<Row>(
  // biome-ignore lint/suspicious/noExplicitAny: any table
  everyRow: SelectQueryBuilder<any, any, Row>,
  filters: Filters,
  params: SearchParams,
  idColumn: string,
  options: {
    counts?: VersionedCounts;
    rowsByIds?: (ids: number[]) => Promise<Row[]>;
    owner?: SearchOwner;
    partitions?: SearchPartitions;
  } = {},
): Promise<SearchResult<Row>> {
  const { counts, rowsByIds, owner, partitions } = options;
  const query = owner ? ownedRows(everyRow, owner) : everyRow;
  const page = params.page ?? 1;
  const perPage = params.per_page ?? DEFAULT_PER_PAGE;
  const terms = filterTerms(filters, params);
  // `filter1 = a OR filter1 = b OR filter2 ILIKE '%c%'`; every row when no filter is given.
  const matching =
    terms.length > 0
      ? sql<SqlBool>`(${sql.join(
          terms.map((term) => term.condition),
          sql` OR `,
        )})`
      : undefined;
  const filtered = matching ? query.where(matching) : query;
  const paged = partitions
    ? partitionedPage(partitions, filtered, terms, idColumn, perPage, (page - 1) * perPage)
    : (owner ? filtered.orderBy(sql.ref(owner.column)) : filtered)
        .orderBy(sql.ref(idColumn))
        .limit(perPage)
        .offset((page - 1) * perPage);
  const countOf = (condition?: Expression<SqlBool>): AnySelect<{ n: string }> =>
    (condition ? query.where(condition) : query).clearSelect().select(sql<string>`count(*)`.as('n'));

  const parts = counts ? countParts(terms, counts) : [];
  const partCount = (part: CountPart) => part.kept ?? countOf(part.condition);
  // What rides on the page: the whole count, or the version, the parts the database keeps and
  // the parts not known yet.
  // biome-ignore lint/suspicious/noExplicitAny: sub-selects of any table
  const meta: SelectExpression<any, any>[] = counts
    ? [
        counts.version.as(`${META}version`),
        ...parts.flatMap((part, index) => (part.kept || !counts.cache.entry(part.key) ? [partCount(part).as(`${META}${index}`)] : [])),
      ]
    : [countOf(matching).as(`${META}total`)];
  const pageQuery = (
    rowsByIds && !partitions ? paged.clearSelect().select(sql<number>`${sql.ref(idColumn)}`.as('id')) : paged
  ) as AnySelect<object>;
  const found = (await pageQuery.select(meta).execute()) as Record<string, unknown>[];
  const first = metaOf(found[0]);
  let rows: Row[];
  if (rowsByIds) {
    const ids = found.map((row) => Number(row.id));
    const byId = new Map((ids.length > 0 ? await rowsByIds(ids) : []).map((row) => [Number((row as { id: number }).id), row]));
    // A row deleted between the two statements is left out.
    rows = ids.flatMap((id) => byId.get(id) ?? []);
  } else rows = found.map(withoutMeta) as Row[];

  let total: number;
  if (found.length < perPage && (found.length > 0 || page === 1)) {
    // A short page is the last one: the total follows from it.
    total = (page - 1) * perPage + found.length;
  } else if (!counts) {
    // No row came back to carry the total (a page past the end): it is counted on its own.
    total = Number(found.length > 0 ? first[`${META}total`] : ((await countOf(matching).executeTakeFirst())?.n ?? 0));
  } else {
    total = await partsTotal(counts, parts, found.length > 0 ? first : undefined, partCount);
  }
  if (counts && found.length > 0) rememberParts(counts, parts, first);
  return { rows, page, perPage, total };
}

/** The owner of the rows searched: the column naming it and its value. */
interface SearchOwner {
  column: string;
  id: number;
}

/**
 * The owner's rows, for a page in `(owner, id)` order: `owner = ANY('{id}')`, one owner written as
 * a list. With `owner = id` PostgreSQL treats the owner as a constant, sees that the primary key
 * gives id order too, and may walk it — guessing the owner's rows spread evenly over the table.
 * When they are not (an owner's rows are created together), `status=Saved&name=abc` walked 10,069
 * other rows before the owner's first (2.1 ms), and a filter that matches none of the owner's rows
 * walked the whole table (0.5 s for `name=ben` among 1,000,000 drops, the statement timeout under
 * load). Written as a list, only the owner's `(owner, id)` index gives that order: the page then
 * reads the owner's rows only, and stops after `per_page` matches (docs/performance.md).
 */
function ownedRows<Row>(query: AnySelect<Row>, owner: SearchOwner): AnySelect<Row> {
  return query.where(sql<SqlBool>`${sql.ref(owner.column)} = ANY(${[owner.id]}::bigint[])`);
}

/**
 * Rows that fall into disjoint partitions by one column (a message's deliveries by state), each
 * partition in id order in an index that leads with it (`deliveries_message_state_idx`: message,
 * state, id), but no index in id order across them.
 */
interface SearchPartitions {
  db: Db;
  column: string;
  values: readonly string[];
  /** The filter on that column: when it is the only one given, only its values are read. */
  filter: string;
}

/**
 * The page as the merge of each partition's first `offset + limit` rows in id order: a few index
 * entries per partition. Ordered by id alone, the only index in id order is the primary key, and
 * PostgreSQL walked it past every other message's deliveries (87 ms, 900,000 rows, for the
 * tenth 100,000-recipient send; more with every send). An index in (message, id) order would
 * serve it too, but it cost sending 8 % (one more index to update three times per delivery).
 */
function partitionedPage<Row>(
  partitions: SearchPartitions,
  filtered: AnySelect<Row>,
  terms: Term[],
  idColumn: string,
  limit: number,
  offset: number,
): AnySelect<Row> {
  const own = terms.length > 0 && terms.every((term) => term.name === partitions.filter);
  const values = own ? [...new Set(terms.map((term) => String(term.value)))] : partitions.values;
  const branches = values.map(
    (value) =>
      sql`(${filtered
        .where(sql.ref(partitions.column), '=', value)
        .orderBy(sql.ref(idColumn))
        .limit(offset + limit)})`,
  );
  const id = idColumn.slice(idColumn.lastIndexOf('.') + 1);
  return partitions.db
    .selectFrom(sql`(${sql.join(branches, sql` UNION ALL `)})`.as('page'))
    .selectAll()
    .orderBy(sql.ref(`page.${id}`))
    .limit(limit)
    .offset(offset) as unknown as AnySelect<Row>;
}

/** The columns of `META` on a row (none when there is no row). */
function metaOf(row: Record<string, unknown> | undefined): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  for (const key of Object.keys(row ?? {})) if (key.startsWith(META)) meta[key] = row?.[key];
  return meta;
}

function withoutMeta(row: Record<string, unknown>): Record<string, unknown> {
  for (const key of Object.keys(row)) if (key.startsWith(META)) delete row[key];
  return row;
}

/**
 * `t1 OR t2 OR … tn` as disjoint parts: `t1`, `t2 AND t1 IS NOT TRUE`, …, `tn AND NOT (any
 * earlier)` (`IS NOT TRUE`, so that a NULL column counts as not matching, as in the OR). Filters
 * other than text come first, so that the part a text filter adds is the few rows its trigram index
 * finds (minus the earlier parts, checked on those rows only). Each part's total is kept under the
 * terms it depends on: `status=Saved&name=abc` and then `status=Saved&name=abd` count the 15,000
 * Saved drops once, and each name only over the rows its index finds (docs/performance.md).
 */
function countParts(terms: Term[], counts: VersionedCounts): CountPart[] {
  if (terms.length === 0) return [{ key: `${counts.key} []`, condition: sql<SqlBool>`true` }];
  // Each term's count as the database keeps it (when it does), asked once per term.
  const keptOf = new Map(terms.map((term) => [term, counts.kept?.(term.name, term.value)]));
  const ordered = [
    ...terms.filter((term) => keptOf.get(term)),
    ...terms.filter((term) => !term.text && !keptOf.get(term)),
    ...terms.filter((term) => term.text && !keptOf.get(term)),
  ];
  return ordered.map((term, index) => {
    const earlier = ordered.slice(0, index);
    // `status=Sent` after `status=Saved` is every Sent row (or none, after `status=Sent`): the
    // database's own count, when it keeps one for each of these terms of one filter.
    const own = keptOf.get(term);
    const kept =
      own && earlier.every((e) => e.name === term.name) ? (earlier.some((e) => e.value === term.value) ? sql<number>`0` : own) : undefined;
    return {
      kept,
      key: `${counts.key} ${JSON.stringify(ordered.slice(0, index + 1).map(({ name, value }) => [name, value]))}`,
      condition:
        earlier.length === 0
          ? term.condition
          : sql<SqlBool>`${term.condition} AND (${sql.join(
              earlier.map((e) => e.condition),
              sql` OR `,
            )}) IS NOT TRUE`,
    };
  });
}

/** Keeps the parts counted on the page's first row, under the version read with them. */
function rememberParts(counts: VersionedCounts, parts: CountPart[], first: Record<string, unknown>): void {
  const version = String(first[`${META}version`] ?? 0);
  parts.forEach((part, index) => {
    const counted = first[`${META}${index}`];
    if (counted !== undefined && !part.kept) counts.cache.set(part.key, version, Number(counted));
  });
}

/**
 * The total from the parts: those counted with the page, and those known for the version read with
 * it. When the rows changed since a part was counted (or no row came back to carry the counts), the
 * parts are counted again, all together with the version, in one more statement.
 */
async function partsTotal(
  counts: VersionedCounts,
  parts: CountPart[],
  first: Record<string, unknown> | undefined,
  partCount: (part: CountPart) => AliasableExpression<unknown>,
): Promise<number> {
  if (first) {
    const version = String(first[`${META}version`] ?? 0);
    const totals = parts.map((part, index) => {
      const counted = first[`${META}${index}`];
      if (counted !== undefined) return Number(counted);
      return counts.cache.get(part.key, version);
    });
    if (totals.every((n) => n !== undefined)) return (totals as number[]).reduce((sum, n) => sum + n, 0);
  }
  const again = (await counts.db
    .selectNoFrom([counts.version.as(`${META}version`), ...parts.map((part, index) => partCount(part).as(`${META}${index}`))])
    .executeTakeFirstOrThrow()) as Record<string, unknown>;
  rememberParts(counts, parts, again);
  return parts.reduce((sum, _, index) => sum + Number(again[`${META}${index}`]), 0);
}

/**
 * Totals of earlier searches, each valid while the version of the rows it counted is unchanged
 * (for messages, a per-owner change counter kept by the database: db/migrations/0009). Counting
 * 100,000 rows through a text filter takes PostgreSQL tens of milliseconds; paging through the
 * result, or repeating the search, then costs only the page.
 */
export class CountCache {
  readonly #entries = new Map<string, { version: string; total: number }>();
  readonly #limit: number;

  constructor(limit = 10_000) {
    this.#limit = limit;
  }

  /** The last total kept under `key`, whatever version it was counted under. */
  entry(key: string): { version: string; total: number } | undefined {
    return this.#entries.get(key);
  }

  /**
   * A total still valid under `version`. A hit moves the entry to the back of the eviction order:
   * the parts every search shares (`status=Sent`, counted over most of an owner's rows) stay while
   * thousands of one-off text parts come and go, instead of being counted again every `limit` searches.
   */
  get(key: string, version: string): number | undefined {
    const entry = this.#entries.get(key);
    if (entry?.version !== version) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.total;
  }

  set(key: string, version: string, total: number): void {
    this.#entries.delete(key);
    if (this.#entries.size >= this.#limit) this.#entries.delete(this.#entries.keys().next().value as string);
    this.#entries.set(key, { version, total });
  }
}

interface VersionedCounts {
  db: Db;
  cache: CountCache;
  /** Names the rows searched (collection and owner); the filters are added to it. */
  key: string;
  /** The current version of those rows, as a scalar sub-select (read in the search's statement). */
  version: RawBuilder<string | null>;
  /**
   * The count of the rows where filter `name` equals `value`, when the database keeps it (a scalar
   * sub-select, read in the same statement as the version); undefined when it must be counted.
   */
  kept?: (name: string, value: unknown) => AliasableExpression<unknown> | undefined;
}
