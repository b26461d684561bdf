import type { FastifyRequest } from 'fastify';
import { type TSchema, Type } from 'typebox';
import { DEFAULT_PER_PAGE, type FilterSpec, type Filters, MAX_PER_PAGE, type SearchResult } from '../db/search.ts';
import { Id, StringEnum } from '../json-schema.ts';

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
  const title = (item as { title?: string }).title;
  return Type.Object(
    {
      data: Type.Array(item),
      links: Type.Object(
        {
          first: Type.String(),
          last: Type.String(),
          prev: Type.Union([Type.String(), Type.Null()]),
          next: Type.Union([Type.String(), Type.Null()]),
        },
        { title: 'PageLinks' },
      ),
      meta: Type.Object(
        {
          current_page: Type.Integer(),
          from: Type.Union([Type.Integer(), Type.Null()]),
          last_page: Type.Integer(),
          path: Type.String(),
          per_page: Type.Integer(),
          to: Type.Union([Type.Integer(), Type.Null()]),
          total: Type.Integer(),
        },
        { title: 'PageMeta' },
      ),
    },
    title ? { title: `${title}Collection` } : {},
  );
}

/**
 * A search result in the Laravel-style envelope: `data` (each row through `toApi`), `links` that
 * keep the request's filters, and `meta` with the collection URL and the totals.
 */
export function envelope<Row, Out>(result: SearchResult<Row>, toApi: (row: Row) => Out, request: FastifyRequest, publicUrl: string) {
  const { page, perPage, total } = result;
  const data = result.rows.map(toApi);
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
