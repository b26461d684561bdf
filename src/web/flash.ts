import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import type { Db } from '../db/database.ts';
import { storeSessionFlash, takeSessionFlash } from '../identity/web-sessions.ts';

/**
 * A one-time message across a redirect ("flash"): a form answers its POST with a 303, so a reload
 * repeats the GET and never the POST, and what the next page must show once (a new API key) waits
 * on the session row until that page takes it. It is sealed with AES-256-GCM under a key derived
 * from the session's cookie token, which the database never holds: a copy of the table reveals
 * nothing. A message not taken within FLASH_LIFETIME_MS is dropped unread.
 */
const FLASH_LIFETIME_MS = 5 * 60_000;

interface Flash {
  newKey?: { name: string; key: string };
  /** A new webhook endpoint's signing secret, for the endpoint's page (pages/webhooks.ts). */
  newSecret?: { endpointId: number; secret: string };
  /** What a form did, said once on the page its redirect leads to. */
  notice?: string;
  /** A resend that queued one page of events: where the next page starts (the API's `next_since`, `next_after_event_id`). */
  resendNext?: { endpointId: number; since: string; afterEventId: number; until: string };
  /** A one-time invitation link just made on /users (pages/users.ts). */
  invitation?: { userId: number; name: string; url: string; expiresAt: string };
}

/** The sealing key of a session, from its cookie token (as the CSRF token is). */
export function flashKey(sessionToken: string): Buffer {
  return createHmac('sha256', sessionToken).update('hopper web flash').digest();
}

export async function setFlash(db: Db, session: { id: number; flashKey: Buffer }, flash: Flash, now: Date): Promise<void> {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', session.flashKey, iv);
  const plain = JSON.stringify({ until: now.getTime() + FLASH_LIFETIME_MS, flash });
  const sealed = Buffer.concat([iv, cipher.update(plain, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  await storeSessionFlash(db, session.id, sealed);
}

/** The session's waiting message, taken (never shown twice), or an empty one. */
export async function takeFlash(db: Db, session: { id: number; flashKey: Buffer }, now: Date): Promise<Flash> {
  const sealed = await takeSessionFlash(db, session.id);
  if (!sealed || sealed.length < 28) return {};
  try {
    const decipher = createDecipheriv('aes-256-gcm', session.flashKey, sealed.subarray(0, 12));
    decipher.setAuthTag(sealed.subarray(sealed.length - 16));
    const plain = Buffer.concat([decipher.update(sealed.subarray(12, sealed.length - 16)), decipher.final()]).toString('utf8');
    const { until, flash } = JSON.parse(plain) as { until: number; flash: Flash };
    return now.getTime() <= until ? flash : {};
  } catch {
    return {};
  }
}
