import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatTimestamp } from '../src/time.ts';

describe('formatTimestamp', () => {
  test('ISO 8601 in UTC without fraction, whatever the instant', () => {
    assert.equal(formatTimestamp(new Date('2025-01-01T00:00:00.999Z')), '2025-01-01T00:00:00Z');
    assert.equal(formatTimestamp(new Date('2026-12-31T23:59:59.001+05:30')), '2026-12-31T18:29:59Z');
    assert.equal(formatTimestamp(new Date('1999-02-28T09:05:07Z')), '1999-02-28T09:05:07Z');
    assert.equal(formatTimestamp(null), null);
    // Years outside four digits keep toISOString()'s form.
    assert.equal(formatTimestamp(new Date('0099-06-01T12:00:00Z')), '0099-06-01T12:00:00Z');
    assert.equal(formatTimestamp(new Date(Date.UTC(12000, 0, 1))), '+012000-01-01T00:00:00Z');
    // The same text as toISOString() cut to seconds, over instants spread across four centuries.
    for (let i = 0; i < 10_000; i++) {
      const date = new Date(Date.UTC(1900, 0, 1) + Math.floor(Math.random() * 400 * 365.25 * 86_400_000));
      assert.equal(formatTimestamp(date), `${date.toISOString().slice(0, 19)}Z`);
    }
  });
});
