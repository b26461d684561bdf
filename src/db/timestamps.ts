import pg from 'pg';

export const TIMESTAMPTZ_OID = 1184;
const slowParse = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (text: string) => Date;

/**
 * A `timestamptz` as PostgreSQL writes it in its default output (DateStyle ISO):
 * `2025-01-01 01:05:00.123456+00`, the offset `+05:30` or `-07:52:58` where the session's time zone
 * has one. Read by hand from the characters' codes, about a quarter of the cost of the driver's
 * own parser (postgres-date: a regular expression and its match array per value, ~380 ns against
 * ~85 ns), which every read pays for each timestamp of each row: a search page of 15 drops carries
 * about 75 (docs/performance.md). Anything else (`infinity`, BC dates, a year past 9999, another
 * DateStyle) goes to the driver's parser, so the result is always the same as the driver's.
 */
export function parseTimestamptz(text: string): Date {
  const n = text.length;
  // The shortest form: `YYYY-MM-DD HH:MM:SS+HH`.
  if (n < 22 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 32) return slowParse(text);
  if (text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58) return slowParse(text);
  let i = 19;
  let ms = 0;
  if (text.charCodeAt(i) === 46) {
    // The fraction: Date keeps milliseconds; the driver's parser drops the rest, as this does.
    i++;
    for (let scale = 100; i < n; i++, scale /= 10) {
      const digit = text.charCodeAt(i) - 48;
      if (digit < 0 || digit > 9) break;
      if (scale >= 1) ms += digit * scale;
    }
  }
  const sign = text.charCodeAt(i);
  if (sign !== 43 && sign !== 45) return slowParse(text);
  let offset = twoDigits(text, i + 1) * 3600;
  i += 3;
  for (let unit = 60; unit >= 1 && i < n && text.charCodeAt(i) === 58; unit /= 60, i += 3) offset += twoDigits(text, i + 1) * unit;
  const year = twoDigits(text, 0) * 100 + twoDigits(text, 2);
  const local = Date.UTC(
    year,
    twoDigits(text, 5) - 1,
    twoDigits(text, 8),
    twoDigits(text, 11),
    twoDigits(text, 14),
    twoDigits(text, 17),
    ms,
  );
  // Left over characters, a field that is not digits (NaN), or a year Date.UTC reads as 19xx.
  if (i !== n || Number.isNaN(local + offset) || year < 100) return slowParse(text);
  return new Date(sign === 43 ? local - offset * 1000 : local + offset * 1000);
}

function twoDigits(text: string, at: number): number {
  const tens = text.charCodeAt(at) - 48;
  const ones = text.charCodeAt(at + 1) - 48;
  return tens >= 0 && tens <= 9 && ones >= 0 && ones <= 9 ? tens * 10 + ones : Number.NaN;
}
