import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import type { Db } from '../db/database.ts';
import { ensureSecret } from '../db/secrets.ts';
import { type Clock, systemClock } from '../time.ts';

/**
 * The signed tokens in an email's open pixel, click redirects and unsubscribe link. A token names
 * one delivery (and, for a click, which link of the message), so whoever holds the email can act
 * for that recipient and nobody can make a token for another one.
 *
 * Bytes, then base64url without padding (35 characters, 38 for a click):
 *   version (1) | purpose (1) | delivery id (8, big-endian) | link index (2, clicks only) | MAC (16)
 * The MAC is HMAC-SHA256 over everything before it, cut to 128 bits. The purpose is signed, so an
 * open token is no unsubscribe token.
 */
const VERSION = 1;
const PURPOSES = { open: 1, click: 2, unsubscribe: 3, reply: 4, bounce: 5 } as const;
type TokenPurpose = keyof typeof PURPOSES;
const MAC_BYTES = 16;
/** The highest link index a click token carries: links past it are left as they are. */
export const MAX_LINK_INDEX = 0xffff;
/** The row of `secrets` holding the signing key; made once per database (db/secrets.ts). */
export const TRACKING_KEY_SECRET = 'tracking-token-key';

interface TokenClaim {
  deliveryId: number;
  /** The link's index among the message's links; 0 unless the purpose is `click`. */
  link: number;
}

export class TrackingTokens {
  // A KeyObject, made once: HMAC with a raw Buffer key builds one per call, five times slower.
  readonly #key: KeyObject;

  constructor(key: Buffer) {
    if (key.length < 32) throw new RangeError('the tracking key must be at least 32 bytes');
    this.#key = createSecretKey(key);
  }

  sign(purpose: TokenPurpose, deliveryId: number, link = 0): string {
    if (!Number.isSafeInteger(deliveryId) || deliveryId < 1) throw new RangeError(`not a delivery id: ${deliveryId}`);
    if (!Number.isInteger(link) || link < 0 || link > MAX_LINK_INDEX || (purpose !== 'click' && link !== 0)) {
      throw new RangeError(`not a link index for ${purpose}: ${link}`);
    }
    const payload = Buffer.alloc(payloadLength(purpose));
    payload.writeUInt8(VERSION, 0);
    payload.writeUInt8(PURPOSES[purpose], 1);
    payload.writeBigUInt64BE(BigInt(deliveryId), 2);
    if (purpose === 'click') payload.writeUInt16BE(link, 10);
    return Buffer.concat([payload, this.#mac(payload)]).toString('base64url');
  }

  /** What a token says, or undefined when it is malformed, for another purpose, or not signed with our key. */
  verify(purpose: TokenPurpose, token: string): TokenClaim | undefined {
    const length = payloadLength(purpose) + MAC_BYTES;
    if (typeof token !== 'string' || token.length !== Math.ceil((length * 4) / 3) || !/^[A-Za-z0-9_-]+$/.test(token)) return undefined;
    const bytes = Buffer.from(token, 'base64url');
    // One spelling per token: base64url leaves spare bits in the last character.
    if (bytes.length !== length || bytes.toString('base64url') !== token) return undefined;
    const payload = bytes.subarray(0, length - MAC_BYTES);
    if (!timingSafeEqual(bytes.subarray(length - MAC_BYTES), this.#mac(payload))) return undefined;
    if (payload.readUInt8(0) !== VERSION || payload.readUInt8(1) !== PURPOSES[purpose]) return undefined;
    const deliveryId = payload.readBigUInt64BE(2);
    if (deliveryId < 1n || deliveryId > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
    return { deliveryId: Number(deliveryId), link: purpose === 'click' ? payload.readUInt16BE(10) : 0 };
  }

  /**
   * The same token as lower-case hex, for the local part of an email address (`r-…@`, `b-…@`,
   * `u-…@`): mail systems may change the case of an address, and hex survives that.
   */
  signForAddress(purpose: Exclude<TokenPurpose, 'click'>, deliveryId: number): string {
    return Buffer.from(this.sign(purpose, deliveryId), 'base64url').toString('hex');
  }

  verifyFromAddress(purpose: Exclude<TokenPurpose, 'click'>, hex: string): TokenClaim | undefined {
    if (typeof hex !== 'string' || !/^[0-9a-fA-F]{52}$/.test(hex)) return undefined;
    return this.verify(purpose, Buffer.from(hex, 'hex').toString('base64url'));
  }

  #mac(payload: Buffer): Buffer {
    return createHmac('sha256', this.#key).update(payload).digest().subarray(0, MAC_BYTES);
  }
}

function payloadLength(purpose: TokenPurpose): number {
  return purpose === 'click' ? 12 : 10;
}

/** The database's tracking key (made on first use, at `clock`'s time), ready to sign and check tokens. */
export async function loadTrackingTokens(db: Db, clock: Clock = systemClock): Promise<TrackingTokens> {
  return new TrackingTokens(await ensureSecret(db, TRACKING_KEY_SECRET, clock()));
}
