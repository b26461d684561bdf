import { isTimeZone } from '../time.ts';
import { ALL_US_ZONES, endsEarly, zonesOfAreaCode } from './area-codes.ts';

/**
 * Calling hours: a drop goes out only between 08:00 and 21:00 in the recipient's local time
 * (20:00 in Florida, Oklahoma and Washington). The recipient's zone is the contact's `time_zone`
 * when set; otherwise every zone the number's area code may be in, all of which must be inside
 * the window; otherwise (an area code the table does not know) every US zone. The state rule
 * follows the area code, and an unknown area code gets the earlier end.
 */
const START_HOUR = 8;
const END_HOUR = 21;
const EARLY_END_HOUR = 20;

interface CallingWindow {
  zones: readonly string[];
  /** Local hour (exclusive) at which the window closes. */
  endHour: number;
  /** Where the zones come from, for the reason given when a drop is held. */
  basis: 'the contact’s time zone' | 'the area code' | 'every US time zone';
}

type CallingHoursVerdict = { allowed: true } | { allowed: false; until: Date; reason: string };

function callingWindow(phone: string, contactTimeZone: string | null): CallingWindow {
  const areaCode = phone.slice(0, 3);
  const areaZones = zonesOfAreaCode(areaCode);
  const endHour = areaZones && !endsEarly(areaCode) ? END_HOUR : EARLY_END_HOUR;
  if (contactTimeZone && isTimeZone(contactTimeZone)) return { zones: [contactTimeZone], endHour, basis: 'the contact’s time zone' };
  if (areaZones) return { zones: areaZones, endHour, basis: 'the area code' };
  return { zones: ALL_US_ZONES, endHour, basis: 'every US time zone' };
}

/** Whether a drop to `phone` may go out at `now`, and if not, when it may. */
export function checkCallingHours(phone: string, contactTimeZone: string | null, now: Date): CallingHoursVerdict {
  const window = callingWindow(phone, contactTimeZone);
  if (insideWindow(window, now)) return { allowed: true };
  const until = nextOpening(window, now);
  const local = window.zones.map((zone) => `${hhmm(wallClock(zone, now))} in ${zone}`).join(', ');
  const hours = `${pad(START_HOUR)}:00–${pad(window.endHour)}:00`;
  return {
    allowed: false,
    until,
    reason: `Outside calling hours (${hours} recipient time, by ${window.basis}): it is ${local}; held until ${until.toISOString()}.`,
  };
}

function insideWindow(window: CallingWindow, at: Date): boolean {
  return window.zones.every((zone) => {
    const w = wallClock(zone, at);
    const seconds = w.hour * 3600 + w.minute * 60 + w.second;
    return seconds >= START_HOUR * 3600 && seconds < window.endHour * 3600;
  });
}

/**
 * The first moment after `now` inside the window. The allowed time is the intersection of one
 * interval per zone, so it opens at one of the zones' 08:00: the earliest of those (today or
 * on the next two days, in each zone) at which every zone is inside is the answer.
 */
function nextOpening(window: CallingWindow, now: Date): Date {
  const candidates: Date[] = [];
  for (const zone of window.zones) {
    const today = wallClock(zone, now);
    for (let day = 0; day <= 2; day++) {
      const opening = zonedInstant(zone, today.year, today.month, today.day + day, START_HOUR);
      if (opening.getTime() > now.getTime()) candidates.push(opening);
    }
  }
  candidates.sort((a, b) => a.getTime() - b.getTime());
  // The zones of one number are neighbours, so an opening always exists; a day later is the
  // fallback that keeps a drop held rather than sent if a zone list ever had none.
  return candidates.find((at) => insideWindow(window, at)) ?? new Date(now.getTime() + 86_400_000);
}

interface WallClock {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The date and time a clock in `zone` shows at `at`. */
function wallClock(zone: string, at: Date): WallClock {
  let format = formatters.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, format);
  }
  const parts: Record<string, number> = {};
  for (const part of format.formatToParts(at)) if (part.type !== 'literal') parts[part.type] = Number(part.value);
  return {
    year: parts.year ?? 0,
    month: parts.month ?? 1,
    day: parts.day ?? 1,
    hour: parts.hour ?? 0,
    minute: parts.minute ?? 0,
    second: parts.second ?? 0,
  };
}

/** The instant at which a clock in `zone` shows the given local time (days past the month's end roll over). */
export function zonedInstant(zone: string, year: number, month: number, day: number, hour: number, minute = 0, second = 0): Date {
  const wall = Date.UTC(year, month - 1, day, hour, minute, second);
  // The zone's offset at the guess; a second pass settles guesses that straddle a DST change.
  let guess = wall - offsetMs(zone, wall);
  guess = wall - offsetMs(zone, guess);
  return new Date(guess);
}

function offsetMs(zone: string, atMs: number): number {
  const whole = Math.floor(atMs / 1000) * 1000;
  const w = wallClock(zone, new Date(whole));
  return Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second) - whole;
}

const pad = (n: number) => String(n).padStart(2, '0');
const hhmm = (w: WallClock) => `${pad(w.hour)}:${pad(w.minute)}`;
