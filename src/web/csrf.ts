import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Cross-site request forgery protection: every form carries a token in the hidden field `_csrf`
 * that a page on another site cannot know, and every POST is refused (403) without it.
 *
 * - Signed in: the token is an HMAC of the session token, so nothing extra is stored, and a copy of
 *   the sessions table (which holds only SHA-256 digests) cannot produce it.
 * - The sign-in form has no session yet: a random token goes both into a `__Host-` cookie and into
 *   the form, and the POST must bring both, equal ("double submit"). That stops a foreign page from
 *   signing the browser into the attacker's account.
 */
export const CSRF_FIELD = '_csrf';
export const SIGN_IN_COOKIE = '__Host-hopper_sign_in';

export function sessionCsrfToken(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('hopper web form').digest('base64url');
}

export function newSignInToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Constant-time equality of a submitted token with the expected one; false for anything but a string. */
export function tokensMatch(submitted: unknown, expected: string | undefined): boolean {
  if (typeof submitted !== 'string' || !expected) return false;
  const a = Buffer.from(submitted);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
