import { randomBytes, randomInt, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * Passwords are stored as scrypt hashes in the PHC string form
 * `$scrypt$ln=15,r=8,p=1$<salt>$<hash>` (base64, no padding): the cost travels with each hash, so
 * it can be raised later without invalidating the passwords already stored.
 */
export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 1024;

const COST = { ln: 15, r: 8, p: 1 } as const;
const SALT_BYTES = 16;
const HASH_BYTES = 32;
// scrypt needs 128 * N * r bytes; Node's default ceiling (32 MiB) is exactly N=2^15, r=8, so leave room.
const MAX_MEMORY = 64 * 1024 * 1024;
const PHC = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;
const ALPHABET = '23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

function derive(password: string, salt: Buffer, length: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, length, { ...options, maxmem: MAX_MEMORY }, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const hash = await derive(password, salt, HASH_BYTES, { N: 2 ** COST.ln, r: COST.r, p: COST.p });
  return `$scrypt$ln=${COST.ln},r=${COST.r},p=${COST.p}$${b64(salt)}$${b64(hash)}`;
}

/** A hash of nothing anyone knows: unknown accounts are checked against it so they take as long as known ones. */
let decoy: Promise<string> | undefined;

/**
 * True when `password` matches `stored`. A missing or unreadable hash still costs one scrypt run,
 * so the time taken does not tell an unknown email from a wrong password.
 */
export async function verifyPassword(password: string, stored: string | null | undefined): Promise<boolean> {
  const parsed = stored ? PHC.exec(stored) : null;
  if (!parsed) {
    decoy ??= hashPassword(randomBytes(16).toString('hex'));
    await verifyPassword(password, await decoy);
    return false;
  }
  const [, ln, r, p, salt, hash] = parsed as unknown as [string, string, string, string, string, string];
  const expected = Buffer.from(hash, 'base64');
  const actual = await derive(password, Buffer.from(salt, 'base64'), expected.length, {
    N: 2 ** Number(ln),
    r: Number(r),
    p: Number(p),
  });
  return timingSafeEqual(actual, expected);
}

/** A password for the first-start Administrator: 20 characters without look-alikes (about 116 bits). */
export function generatePassword(): string {
  let out = '';
  for (let i = 0; i < 20; i++) out += ALPHABET[randomInt(ALPHABET.length)];
  return out;
}
