import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { parseTimestamptz, TIMESTAMPTZ_OID } from '../../src/db/timestamps.ts';

/**
 * Hopper reads `timestamptz` with its own parser (db/timestamps.ts), not the driver's: it must give
 * the same value as the driver's (postgres-date) for whatever PostgreSQL writes. The texts are the
 * database's own (PostgreSQL with DATABASE_URL, PGlite otherwise), in time zones with offsets in
 * hours, half and quarter hours and, before standard time, seconds; with and without fractions;
 * across daylight-saving changes; the first century, BC, 9999 and infinity.
 */
const ZONES = ['UTC', 'Asia/Kolkata', 'Asia/Kathmandu', 'America/St_Johns', 'America/Los_Angeles', 'Europe/Amsterdam', 'Pacific/Chatham'];

const SELECT = `
  SELECT t::text AS text FROM (
    SELECT timestamptz '2025-01-01 00:00:00+00' + n * interval '1 day 1 hour 1 minute 1.234567 second' AS t FROM generate_series(-1000, 1000) n
    UNION ALL SELECT timestamptz '1883-11-18 12:00:00+00' + n * interval '97 days 13 minutes 7.5 seconds' FROM generate_series(-300, 300) n
    UNION ALL SELECT timestamptz '2024-03-10 09:59:59.999999+00' + n * interval '1 second' FROM generate_series(0, 3) n
    UNION ALL SELECT timestamptz '2024-11-03 08:59:59.5+00' + n * interval '1 hour' FROM generate_series(0, 3) n
    UNION ALL SELECT unnest(ARRAY[timestamptz '0001-01-01 00:00:00+00', '0099-12-31 23:59:59.001+00', '0100-01-01 00:00:00+00',
      '1969-12-31 23:59:59.999+00', '1970-01-01 00:00:00+00', '9999-12-31 23:59:59.999999+00', '0044-03-15 12:00:00+00 BC',
      'infinity', '-infinity', now()])
  ) s`;

/** The database the suite runs on, asked for the text of one column. */
async function openDatabase(): Promise<{ texts(sql: string): Promise<string[]>; close(): Promise<void> }> {
  if (process.env.DATABASE_URL) {
    const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await client.connect();
    return {
      texts: async (sql) => (await client.query<{ text: string }>(sql)).rows.map((row) => row.text),
      close: () => client.end(),
    };
  }
  const { PGlite } = await import('@electric-sql/pglite');
  const db = await PGlite.create();
  return { texts: async (sql) => (await db.query<{ text: string }>(sql)).rows.map((row) => row.text), close: () => db.close() };
}

async function databaseTexts(): Promise<Map<string, string[]>> {
  const byZone = new Map<string, string[]>();
  const db = await openDatabase();
  try {
    for (const zone of ZONES) {
      await db.texts(`SET TimeZone = '${zone}'`);
      byZone.set(zone, await db.texts(SELECT));
    }
  } finally {
    await db.close();
  }
  return byZone;
}

test("every timestamptz the database writes is read as the driver's own parser reads it", async () => {
  const driver = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (text: string) => unknown;
  const value = (parsed: unknown) => (parsed instanceof Date ? parsed.getTime() : parsed);
  for (const [zone, texts] of await databaseTexts()) {
    assert.ok(texts.length > 2600, `${zone}: ${texts.length} texts`);
    for (const text of texts) {
      assert.ok(
        Object.is(value(parseTimestamptz(text)), value(driver(text))),
        `${zone}: ${text}: ${parseTimestamptz(text)} against ${driver(text)}`,
      );
    }
  }
});

test('forms PostgreSQL does not write with DateStyle ISO are left to the driver, whatever they give', () => {
  const driver = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (text: string) => unknown;
  for (const text of [
    '2025-01-01T01:00:00+00',
    '2025-01-01 01:00:00',
    '2025-01-01 01:00:00Z',
    '2025-13-01 01:00:00+00',
    '2025-1a-01 01:00:00+00',
    '12025-01-01 01:00:00+00',
    'garbage but long enough',
  ]) {
    const ours = parseTimestamptz(text);
    const theirs = driver(text);
    const same = ours instanceof Date && theirs instanceof Date ? Object.is(ours.getTime(), theirs.getTime()) : Object.is(ours, theirs);
    assert.ok(same, `${text}: ${ours} against ${theirs}`);
  }
});
