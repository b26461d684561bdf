import assert from 'node:assert/strict';
import type { asKey, Reply } from './client.ts';
import { assertShape, pageShape, type Shape } from './shapes.ts';

const PUBLIC_URL = 'https://hopper.test';

/** The ids of a search page, in the order returned. */
export function idsOf(reply: Reply): number[] {
  assert.equal(reply.status, 200, reply.raw);
  return reply.body.data.map((row: { id: number }) => row.id);
}

/** Two URLs naming the same path with the same query parameters (encoding and order aside). */
export function assertSameUrl(actual: string | null, expected: string, what: string): void {
  assert.ok(actual, `${what}: missing`);
  const a = new URL(actual);
  const e = new URL(expected);
  assert.equal(`${a.origin}${a.pathname}`, `${e.origin}${e.pathname}`, what);
  const params = (u: URL) => [...u.searchParams.entries()].map(([k, v]) => `${k}=${v}`).sort();
  assert.deepEqual(params(a), params(e), `${what}: ${actual}`);
}

/**
 * Walks every page of a search (`url` may carry filters) at `perPage` rows a page, plus one page
 * past the end, and checks that together they hold exactly `expectedIds` in id order, with the
 * envelope, meta and links (which keep the filters) right on each page.
 */
export async function assertPaging(
  client: ReturnType<typeof asKey>,
  url: string,
  expectedIds: readonly number[],
  perPage: number,
  item: Shape,
): Promise<void> {
  const total = expectedIds.length;
  const lastPage = Math.max(1, Math.ceil(total / perPage));
  const [path = ''] = url.split('?');
  const at = (page: number) => `${url}${url.includes('?') ? '&' : '?'}per_page=${perPage}&page=${page}`;
  for (let page = 1; page <= lastPage + 1; page++) {
    const reply = await client.get(at(page));
    const what = `GET ${at(page)}`;
    assertShape(reply.body, pageShape(item), what);
    const slice = expectedIds.slice((page - 1) * perPage, page * perPage);
    assert.deepEqual(idsOf(reply), slice, `${what}: rows`);
    const { meta, links } = reply.body;
    assert.deepEqual(
      { ...meta, path: undefined },
      {
        current_page: page,
        from: slice.length > 0 ? (page - 1) * perPage + 1 : null,
        last_page: lastPage,
        path: undefined,
        per_page: perPage,
        to: slice.length > 0 ? (page - 1) * perPage + slice.length : null,
        total,
      },
      `${what}: meta`,
    );
    assert.equal(meta.path, `${PUBLIC_URL}${path}`, `${what}: meta.path`);
    assertSameUrl(links.first, `${PUBLIC_URL}${at(1)}`, `${what}: links.first`);
    assertSameUrl(links.last, `${PUBLIC_URL}${at(lastPage)}`, `${what}: links.last`);
    if (page > 1) assertSameUrl(links.prev, `${PUBLIC_URL}${at(page - 1)}`, `${what}: links.prev`);
    else assert.equal(links.prev, null, `${what}: links.prev`);
    if (page < lastPage) assertSameUrl(links.next, `${PUBLIC_URL}${at(page + 1)}`, `${what}: links.next`);
    else assert.equal(links.next, null, `${what}: links.next`);
  }
}
