import { findLiveContacts, searchContacts } from '../../contacts/contacts.ts';
import type { Db } from '../../db/database.ts';
import { validationError } from '../../errors.ts';
import { zonedInstant } from '../../voicemail/calling-hours.ts';

/**
 * What the compose pages of both kinds share (compose.ts): the buttons, the recipients as
 * checkboxes, the schedule in the user's time zone, the contact search.
 */
export type Action = 'save' | 'schedule' | 'send' | 'cancel' | 'search';
type Group = 'recipients' | 'exclusions';

/** Notices a redirect may ask for by name: the page never echoes text from the URL. */
export const NOTICES: Record<string, string | undefined> = {
  saved: 'Saved as a draft.',
};

/** Contacts a search shows at most. */
const CONTACTS_FOUND = 20;

/** A checkbox group as posted: one value is a string, several an array; anything but ids is left out. */
export function checked(value: unknown): string[] {
  const list = Array.isArray(value) ? value : value === undefined ? [] : [value];
  return [...new Set(list.filter((v): v is string => typeof v === 'string' && /^\d{1,15}$/.test(v)))];
}

/** A stored recipient list as the form's two checkbox groups. */
export function recipientIds(group: Group, stored: readonly { group: string; value: number }[] | null | undefined) {
  const of = (kind: string) => (stored ?? []).filter((r) => r.group === kind).map((r) => String(r.value));
  return { [`${group}_tags`]: of('Tags'), [`${group}_contacts`]: of('Contacts') };
}

/** The API's recipient entries from the form's checkbox groups. */
export function entries(values: Record<string, string | string[]>, group: Group) {
  const ids = (name: string) => checked(values[name]).map(Number);
  return [
    ...ids(`${group}_tags`).map((value) => ({ group: 'Tags' as const, value })),
    ...ids(`${group}_contacts`).map((value) => ({ group: 'Contacts' as const, value })),
  ];
}

/** Only a draft or a scheduled message can be changed; Cancel also stops one that is sending. */
export function isEditable(status: string): boolean {
  return status === 'Saved' || status === 'Scheduled';
}

const LOCAL = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})$/;

/** A date and time as `<input type="datetime-local">` shows it, in the user's zone (UTC without one). */
export function localInput(date: Date, timeZone: string | null): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', {
      timeZone: timeZone ?? 'UTC',
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
    })
      .formatToParts(date)
      .map((p) => [p.type, p.value]),
  );
  return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}`;
}

/**
 * `2026-07-12T16:56` typed in the user's zone (an `<input type="datetime-local">`) as an ISO 8601
 * instant in UTC, as the API takes times; null when empty. Anything else is refused under `field`.
 */
export function instantOfLocal(local: string, timeZone: string | null, field: string): string | null {
  if (local === '') return null;
  const refused = () => validationError({ [field]: ['must be a date and a time, such as 2026-07-12T16:56'] });
  const m = LOCAL.exec(local);
  if (!m) throw refused();
  const [year, month, day, hour, minute] = m.slice(1).map(Number) as [number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59) throw refused();
  return zonedInstant(timeZone ?? 'UTC', year, month, day, hour, minute).toISOString();
}

/**
 * The schedule a button asks the API for: Save leaves it as it is (a new message is a draft),
 * Schedule is Scheduled at the typed time, Send now is Scheduled now, and Cancel takes a
 * scheduled message back to a draft or stops one that is sending.
 */
export function scheduleOf(action: Action, local: string, timeZone: string | null, current: string | undefined) {
  switch (action) {
    case 'schedule':
      return { status: 'Scheduled', send_type: 'Future' as const, send_at: instantOfLocal(local, timeZone, 'send_at') };
    case 'send':
      return { status: 'Scheduled', send_type: 'Now' as const };
    case 'cancel':
      return { status: current === 'Sending' ? 'Cancelled' : 'Saved' };
    default:
      return {};
  }
}

function contactLabel(c: { id: number; first_name: string | null; last_name: string | null; email: string | null; phone: string | null }) {
  const name = [c.first_name, c.last_name].filter(Boolean).join(' ');
  const reach = c.email ?? c.phone ?? '';
  return name && reach ? `${name} (${reach})` : name || reach || `Contact ${c.id}`;
}

/**
 * The contacts the form offers as checkboxes: those already chosen (as recipients or exclusions),
 * then those a search found by name, email or phone (the API's contact search, OR-combined).
 */
export async function contactOptions(db: Db, ownerId: number, values: Record<string, string | string[]>, search: string) {
  const chosen = [...new Set([...checked(values.recipients_contacts), ...checked(values.exclusions_contacts)])].map(Number);
  const known = chosen.length > 0 ? await findLiveContacts(db, ownerId, chosen) : [];
  const text = search.trim().slice(0, 255);
  const found = text
    ? (
        await searchContacts(db, ownerId, {
          per_page: CONTACTS_FOUND,
          first_name: [text],
          last_name: [text],
          email: [text],
          phone: [text],
        })
      ).rows
    : [];
  const seen = new Set<number>();
  return [...known, ...found]
    .filter((c) => !seen.has(c.id) && seen.add(c.id))
    .map((c) => ({ value: String(c.id), label: contactLabel(c), found: !chosen.includes(c.id) }));
}
