import { createHmac, createSecretKey, type KeyObject, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): the secret is `whsec_` + base64
 * of its key bytes; a signature is `v1,` + base64 HMAC-SHA256 of `id.timestamp.body` under those
 * bytes. Several signatures (a rotated secret's old and new) go space-separated in one header.
 */
const PREFIX = 'whsec_';

/** A new signing secret: 32 random bytes. */
export function newSecret(): string {
  return `${PREFIX}${randomBytes(32).toString('base64')}`;
}

/** Secrets' keys, made once: a key made from bytes on every post cost more than the HMAC itself. */
const keys = new Map<string, KeyObject>();
function keyOf(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    if (keys.size >= 1_000) keys.clear();
    key = createSecretKey(Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64'));
    keys.set(secret, key);
  }
  return key;
}

export function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = keyOf(secret);
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The `webhook-signature` header: one signature per secret still in use. */
export function signatureHeader(secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets.map((secret) => sign(secret, id, timestamp, body)).join(' ');
}
