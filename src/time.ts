/** Every timestamp the API returns: ISO 8601 in UTC without fraction, `YYYY-MM-DDThh:mm:ssZ`. */
export function formatTimestamp(date: Date): string;
export function formatTimestamp(date: Date | null): string | null;
export function formatTimestamp(date: Date | null): string | null {
  return date === null ? null : `${date.toISOString().slice(0, 19)}Z`;
}

/** A clock that can be replaced in tests. */
export type Clock = () => Date;
export const systemClock: Clock = () => new Date();

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
