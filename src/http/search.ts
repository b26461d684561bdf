import type { FastifyRequest } from 'fastify';
import { type Expression, type ExpressionBuilder, type SelectQueryBuilder, type SqlBool, sql } from 'kysely';
import { type TSchema, Type } from 'typebox';
import { Id, StringEnum } from './schemas.ts';

/**
 * Search on a collection, as the specification and DESIGN.md §6 describe it: query parameters
 * named after scalar fields are filters, all OR-ed together (several parameters, or one repeated);
 * `page` and `per_page` select the page; rows come in `id` order inside the Laravel-style envelope.
 */
export type FilterSpec =
  | { kind: 'id'; column: string }
  | { kind: 'enum'; column: string; values: readonly string[] }
  | { kind: 'text'; column: string }
  | { kind: 'exact'; column: string };
export type Filters = Record<string, FilterSpec>;

export const DEFAULT_PER_PAGE = 15;
export const MAX_PER_PAGE = 100;
const MAX_FILTER_VALUES = 50;

/** The querystring schema of a search: each filter repeatable, plus `page` and `per_page`. */
export function searchQuery(filters: Filters) {
  const properties: Record<string, TSchema> = {
    page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 })),
    per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PER_PAGE, default: DEFAULT_PER_PAGE })),
  };
  for (const [name, spec] of Object.entries(filters)) {
    properties[name] = Type.Optional(Type.Array(filterValue(spec), { maxItems: MAX_FILTER_VALUES }));
  }
  return Type.Object(properties, { additionalProperties: false });
}

function filterValue(spec: FilterSpec): TSchema {
  switch (spec.kind) {
    case 'id':
      return Id;
    case 'enum':
      return StringEnum(spec.values);
    default:
      return Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\u0000]*$' });
  }
}

export function envelopeSchema<T extends TSchema>(item: T) {
  return Type.Object({
    data: Type.Array(item),
    links: Type.Object({
      first: Type.String(),
      last: Type.String(),
      prev: Type.Union([Type.String(), Type.Null()]),
      next: Type.Union([Type.String(), Type.Null()]),
    }),
    meta: Type.Object({
      current_page: Type.Integer(),
      from: Type.Union([Type.Integer(), Type.Null()]),
      last_page: Type.Integer(),
      path: Type.String(),
      per_page: Type.Integer(),
      to: Type.Union([Type.Integer(), Type.Null()]),
      total: Type.Integer(),
    }),
  });
}

export type SearchParams = { page?: number; per_page?: number } & Record<string, unknown>;

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** `filter1 = a OR filter1 = b OR filter2 ILIKE '%c%'`; true when no filter is given. */
// biome-ignore lint/suspicious/noExplicitAny: filters name columns of whatever table is searched
export function filterCondition(eb: ExpressionBuilder<any, any>, filters: Filters, params: SearchParams): Expression<SqlBool> {
  const conditions: Expression<SqlBool>[] = [];
  for (const [name, spec] of Object.entries(filters)) {
    const values = params[name] as unknown[] | undefined;
    for (const value of values ?? []) {
      conditions.push(
        spec.kind === 'text'
          ? sql<SqlBool>`${sql.ref(spec.column)} ILIKE ${`%${escapeLike(String(value))}%`}`
          : sql<SqlBool>`${sql.ref(spec.column)} = ${value}`,
      );
    }
  }
  return conditions.length > 0 ? eb.or(conditions) : sql<SqlBool>`true`;
}

/**
 * Runs a filtered, paged search. `query` is the owner-scoped base query; the filter condition is
 * added here. One round trip: the total rides along as a window count; a page past the end
 * needs a second, counting query.
 */
export async function searchPage<Row, Out>(
  // biome-ignore lint/suspicious/noExplicitAny: any table
  query: SelectQueryBuilder<any, any, Row>,
  filters: Filters,
  params: SearchParams,
  request: FastifyRequest,
  publicUrl: string,
  idColumn: string,
  toApi: (row: Row) => Out,
) {
  const page = params.page ?? 1;
  const perPage = params.per_page ?? DEFAULT_PER_PAGE;
  const filtered = query.where((eb) => filterCondition(eb, filters, params));
  const rows = (await filtered
    .select(sql<number>`count(*) OVER ()`.as('__total'))
    .orderBy(sql.ref(idColumn))
    .limit(perPage)
    .offset((page - 1) * perPage)
    .execute()) as (Row & { __total: number | string })[];

  let total: number;
  if (rows.length > 0) total = Number(rows[0]?.__total);
  else {
    const counted = await filtered.clearSelect().select(sql<string>`count(*)`.as('n')).executeTakeFirst();
    total = Number((counted as { n: string } | undefined)?.n ?? 0);
  }
  return envelope(rows.map(toApi), { page, perPage, total }, request, publicUrl);
}

export function envelope<T>(
  data: T[],
  paging: { page: number; perPage: number; total: number },
  request: FastifyRequest,
  publicUrl: string,
) {
  const { page, perPage, total } = paging;
  const lastPage = Math.max(1, Math.ceil(total / perPage));
  const [path = '', queryString = ''] = request.url.split('?');
  const base = `${publicUrl}${path}`;
  const link = (n: number) => {
    const query = new URLSearchParams(queryString);
    query.delete('page');
    query.append('page', String(n));
    return `${base}?${query.toString()}`;
  };
  const from = data.length > 0 ? (page - 1) * perPage + 1 : null;
  return {
    data,
    links: {
      first: link(1),
      last: link(lastPage),
      prev: page > 1 ? link(page - 1) : null,
      next: page < lastPage ? link(page + 1) : null,
    },
    meta: {
      current_page: page,
      from,
      last_page: lastPage,
      path: base,
      per_page: perPage,
      to: from === null ? null : from + data.length - 1,
      total,
    },
  };
}
