import { parsePhoneNumberFromString } from 'libphonenumber-js/max';

/** What a caller is told when a phone number is refused, for contacts and callback numbers alike. */
export const NANP_PHONE_RULE = 'must be a valid 10-digit North American phone number, such as (727) 232-9117';

// Digits with the punctuation people type: spaces, dots, dashes, parentheses, one leading +.
// libphonenumber on its own would also pull a number out of prose ("call 727…") or read letters.
const TYPED_PHONE = /^\+?[0-9 ().-]+$/;

/**
 * A North American (NANP: US, Canada, Caribbean) phone number as its 10 digits, or null when the
 * text is not one. Accepts punctuation and a leading 1 or +1. The full ("max") metadata is used so
 * that area codes and exchanges are checked against the numbering plan, not only the length:
 * voicemail providers reject numbers that merely have ten digits.
 */
export function normalizeNanpPhone(text: string): string | null {
  if (text.length > 32 || !TYPED_PHONE.test(text)) return null;
  const digits = text.replace(/\D/g, '');
  // Exactly the national number, optionally behind the country code 1; "1 1 727…" is not a number.
  if (!(digits.length === 10 || (digits.length === 11 && digits.startsWith('1')))) return null;
  if (text.startsWith('+') && digits.length !== 11) return null;
  const number = digits.length === 11 ? `+${digits}` : digits;
  let national = checked.get(number);
  if (national === undefined) {
    const parsed = parsePhoneNumberFromString(number, 'US');
    national = parsed?.countryCallingCode === '1' && parsed.isValid() ? parsed.nationalNumber : null;
    if (checked.size >= MAX_CHECKED) checked.clear();
    checked.set(number, national);
  }
  return national;
}

/**
 * Numbers already checked against the numbering plan, and their answers: parsing one with
 * libphonenumber allocates about 8 kB, a twelfth of what a whole drop create does, and an
 * owner's callback numbers are few (docs/performance.md, "Creates").
 */
const checked = new Map<string, string | null>();
const MAX_CHECKED = 1_000;
