import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CountCache } from '../../src/db/search.ts';

test('the count cache keeps the totals searches share: a hit moves its entry away from eviction', () => {
  const cache = new CountCache(3);
  cache.set('status=Sent', 'v1', 70_000);
  cache.set('name=abc', 'v1', 2);
  cache.set('name=abd', 'v1', 0);
  assert.equal(cache.get('status=Sent', 'v1'), 70_000);
  // A fourth entry evicts the least recently used one: the one-off text part, not the shared status part.
  cache.set('name=abe', 'v1', 1);
  assert.equal(cache.get('status=Sent', 'v1'), 70_000);
  assert.equal(cache.get('name=abc', 'v1'), undefined);
  assert.equal(cache.get('name=abd', 'v1'), 0);
  // A total counted under another version of the rows is not served, but stays known as the last one.
  assert.equal(cache.get('status=Sent', 'v2'), undefined);
  assert.deepEqual(cache.entry('status=Sent'), { version: 'v1', total: 70_000 });
});
