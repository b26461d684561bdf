import { hash, randomInt, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API keys look like `hop_` + 40 random base62 characters + a 6-character checksum: the CRC-32
 * (IEEE) of the 40 characters written in base62 and left-padded with `0`. It is the scheme GitHub
 * uses, so secret scanners can recognise a leaked key, and a mistyped key is refused without a
 * database look-up.
 */
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const PREFIX = 'hop_';
const RANDOM_LENGTH = 40;
const CHECKSUM_LENGTH = 6;
const KEY_PATTERN = /^hop_([0-9A-Za-z]{40})([0-9A-Za-z]{6})$/;
/** How much of a key is kept in clear to tell keys apart in listings: `hop_` and 6 characters. */
const DISPLAY_PREFIX_LENGTH = PREFIX.length + 6;

function base62(n: number, width: number): string {
  let out = '';
  let rest = n;
  do {
    out = ALPHABET[rest % 62] + out;
    rest = Math.floor(rest / 62);
  } while (rest > 0);
  return out.padStart(width, '0');
}

function checksum(random: string): string {
  return base62(crc32(random) >>> 0, CHECKSUM_LENGTH);
}

export function generateApiKey(): string {
  let random = '';
  for (let i = 0; i < RANDOM_LENGTH; i++) random += ALPHABET[randomInt(62)];
  return PREFIX + random + checksum(random);
}

/** Returns the key when its form and checksum are right, undefined otherwise. */
export function parseApiKey(candidate: string): string | undefined {
  const match = KEY_PATTERN.exec(candidate);
  if (!match) return undefined;
  const expected = Buffer.from(checksum(match[1] as string));
  const given = Buffer.from(match[2] as string);
  return timingSafeEqual(expected, given) ? candidate : undefined;
}

/**
 * Keys are stored only as this digest; the look-up is by digest, so no clear key is ever compared.
 * Computed on every authenticated request (one-shot `hash`: no Hash object per request).
 */
export function hashApiKey(key: string): Buffer {
  return hash('sha256', key, 'buffer');
}

export function displayPrefix(key: string): string {
  return key.slice(0, DISPLAY_PREFIX_LENGTH);
}
