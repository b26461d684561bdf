/** Every timestamp the API returns: ISO 8601 in UTC without fraction, `YYYY-MM-DDThh:mm:ssZ`. */
export function formatTimestamp(date: Date): string;
export function formatTimestamp(date: Date | null): string | null;
export function formatTimestamp(date: Date | null): string | null {
  if (date === null) return null;
  const year = date.getUTCFullYear();
  // Built from the UTC fields: a third of the time of toISOString() and a slice, and a search
  // page formats over a hundred timestamps. Years outside 1000–9999 take toISOString()'s form.
  if (year < 1000 || year > 9999) return `${date.toISOString().slice(0, -5)}Z`;
  return `${year}-${twoDigits(date.getUTCMonth() + 1)}-${twoDigits(date.getUTCDate())}T${twoDigits(date.getUTCHours())}:${twoDigits(date.getUTCMinutes())}:${twoDigits(date.getUTCSeconds())}Z`;
}

function twoDigits(n: number): string {
  return n < 10 ? `0${n}` : `${n}`;
}

/**
 * The clock every recorded time comes from (`ctx.clock()`): tests replace it. Waits do not: what
 * the job queue or a timer waits on is real time (`inRealTime`), since pg-boss compares a job's
 * `startAfter` with the database's own clock.
 */
export type Clock = () => Date;
export const systemClock: Clock = () => new Date();

/** The moment `ms` from now by the real clock: when a job should start, or a timer fire. */
export function inRealTime(ms: number): Date {
  return new Date(Date.now() + ms);
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
