/** Every timestamp the API returns: ISO 8601 in UTC without fraction, `YYYY-MM-DDThh:mm:ssZ`. */
export function formatTimestamp(date: Date): string;
export function formatTimestamp(date: Date | null): string | null;
export function formatTimestamp(date: Date | null): string | null {
  if (date === null) return null;
  const year = date.getUTCFullYear();
  // Built from the UTC fields: a third of the time of toISOString() and a slice, and a search
  // page formats over a hundred timestamps. Years outside 1000–9999 take toISOString()'s form.
  if (year < 1000 || year > 9999) return `${date.toISOString().slice(0, -5)}Z`;
  const month = date.getUTCMonth() + 1;
  const day = date.getUTCDate();
  const hours = date.getUTCHours();
  const minutes = date.getUTCMinutes();
  const seconds = date.getUTCSeconds();
  // One string made from its characters' codes (76 ns): a template of the fields made a dozen
  // intermediate strings (170 ns), the largest share of the garbage a search page left.
  return String.fromCharCode(
    tens(year / 100),
    ones(year / 100),
    tens(year % 100),
    ones(year % 100),
    DASH,
    tens(month),
    ones(month),
    DASH,
    tens(day),
    ones(day),
    T,
    tens(hours),
    ones(hours),
    COLON,
    tens(minutes),
    ones(minutes),
    COLON,
    tens(seconds),
    ones(seconds),
    Z,
  );
}

const [ZERO, DASH, COLON, T, Z] = ['0', '-', ':', 'T', 'Z'].map((c) => c.charCodeAt(0)) as [number, number, number, number, number];
/** The character codes of the two digits of `n` (0–99; a fraction is dropped). */
const tens = (n: number) => ZERO + Math.floor(n / 10);
const ones = (n: number) => ZERO + (Math.floor(n) % 10);

/**
 * The clock every recorded time comes from (`ctx.clock()`): tests replace it. Waits do not: what
 * the job queue, a timer, a deadline or a rate limit waits on is real time (`inRealTime`,
 * `realTimeMs`), since pg-boss compares a job's `startAfter` with the database's own clock and a
 * timer fires by the system's. This file is the only one that reads the system's clock
 * (`npm run check:clock`).
 */
export type Clock = () => Date;
export const systemClock: Clock = () => new Date();

/** The moment `ms` from now by the real clock: when a job should start, or a timer fire. */
export function inRealTime(ms: number): Date {
  return new Date(Date.now() + ms);
}

/** Now by the real clock, in milliseconds since the epoch: for deadlines, waits and rate windows, never for a time Hopper records. */
export function realTimeMs(): number {
  return Date.now();
}

/**
 * How long to wait after the `failures`-th failed try in a row before the next: `baseMs` doubled
 * with each failure after the first, at most `maxMs` — with `jitter`, scaled by a random 50–100 %,
 * so that the retries of many failures at once spread out. The one back-off of deliveries (SMTP,
 * providers), webhook posts and a database out of reach.
 */
export function backoffMs(failures: number, policy: { baseMs: number; maxMs: number; jitter?: boolean }): number {
  // The exponent is bounded so that a zero base stays zero (0 × Infinity would be NaN).
  const exponential = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(Math.max(failures - 1, 0), 52));
  return policy.jitter ? Math.round(exponential * (0.5 + Math.random() * 0.5)) : exponential;
}

/** An IANA zone name the runtime knows, such as `America/New_York` or `UTC`. */
export function isTimeZone(name: string): boolean {
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+){0,2}$/.test(name)) return false;
  // Making a formatter takes a quarter of a millisecond: a contact import asks for the same few zones.
  const known = knownZones.get(name);
  if (known !== undefined) return known;
  let valid = true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
  } catch {
    valid = false;
  }
  if (knownZones.size < 2000) knownZones.set(name, valid);
  return valid;
}

const knownZones = new Map<string, boolean>();
