import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { Clock } from '../time.ts';
import type { App } from './fastify-types.ts';
import { doneWhen } from './hook-done.ts';
import { HttpError } from './problems.ts';

/**
 * `Idempotency-Key` on POST, with Stripe's semantics: the first response to a key (per user) is
 * kept for 24 hours and a repeat gets it back byte for byte, with `Idempotent-Replayed: true`,
 * without running again. The same key with another request (method, path or body) is a 422; the
 * same key while the first request still runs is a 409. A 5xx or 429 answer is not kept (the key is
 * freed, so the retry runs); nor is a request refused before its handler (authentication, a
 * malformed body), as no key is taken then.
 *
 * A first response may hold a secret shown once (a new API key, a webhook's signing secret), so
 * nothing stored can be read back without the client's own Idempotency-Key: the row is found by
 * the key's SHA-256 digest and the body is sealed with AES-256-GCM under a key derived from it.
 */
const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
/** A first request still "running" after this long died with its process; its key is taken over. */
const ABANDONED_MS = 5 * 60_000;
const KEY_FORM = /^[\x21-\x7e]{1,255}$/;
const KEPT_HEADERS = ['content-type', 'location'];

declare module 'fastify' {
  interface FastifyRequest {
    /** The key taken by this request: `key` is the stored digest, `header` the client's value. */
    idempotency?: { userId: number; key: string; header: string };
  }
}

/** What the row is looked up by: a digest, so the stored rows do not hold the client's key. */
function keyDigest(header: string): string {
  return createHash('sha256').update(`idempotency-key\0${header}`).digest('base64url');
}

/** The body's sealing key: known only to whoever holds the Idempotency-Key itself. */
function sealingKey(userId: number, header: string): Buffer {
  return createHash('sha256').update(`idempotency-body\0${userId}\0${header}`).digest();
}

function seal(userId: number, header: string, body: Buffer): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealingKey(userId, header), iv);
  const sealed = Buffer.concat([cipher.update(body), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]);
}

function unseal(userId: number, header: string, stored: Buffer): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', sealingKey(userId, header), stored.subarray(0, 12));
  decipher.setAuthTag(stored.subarray(12, 28));
  return Buffer.concat([decipher.update(stored.subarray(28)), decipher.final()]);
}

function requestHash(request: FastifyRequest): string {
  const hash = createHash('sha256').update(`${request.method} ${request.url}\n`);
  // A parsed JSON or form body; a multipart upload is a stream its handler reads, so its headers stand for it.
  if (request.body !== undefined) hash.update(JSON.stringify(request.body));
  else hash.update(`${request.headers['content-type'] ?? ''} ${request.headers['content-length'] ?? ''}`);
  return hash.digest('base64url');
}

export function registerIdempotency(app: App, db: Db, clock: Clock): void {
  const prune = setInterval(() => {
    pruneIdempotencyKeys(db, clock()).catch((error) => app.log.warn({ err: error }, 'pruning idempotency keys failed'));
  }, 600_000);
  prune.unref();
  app.addHook('onClose', async () => clearInterval(prune));
  // Both hooks are synchronous for a request without an Idempotency-Key (http/hook-done.ts).
  app.addHook('preHandler', (request, reply, done) => {
    if (request.method !== 'POST' || !request.principal || request.headers['idempotency-key'] === undefined) return done();
    doneWhen(takeKey(request, reply), done);
  });
  const takeKey = async (request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers['idempotency-key'];
    if (typeof header !== 'string' || !KEY_FORM.test(header)) {
      throw new HttpError('bad_request', 'The Idempotency-Key header must be 1 to 255 printable ASCII characters.');
    }
    const userId = request.principal.userId;
    const key = keyDigest(header);
    const hash = requestHash(request);
    const now = clock();
    for (let attempt = 0; attempt < 3; attempt++) {
      const taken = await db
        .insertInto('idempotency_keys')
        .values({ user_id: userId, key, request_hash: hash, created_at: now })
        .onConflict((oc) => oc.columns(['user_id', 'key']).doNothing())
        .returning('key')
        .executeTakeFirst();
      if (taken) {
        request.idempotency = { userId, key, header };
        return;
      }
      const stored = await db
        .selectFrom('idempotency_keys')
        .selectAll()
        .where('user_id', '=', userId)
        .where('key', '=', key)
        .executeTakeFirst();
      if (!stored) continue; // freed meanwhile: take it
      const age = now.getTime() - stored.created_at.getTime();
      const abandoned = stored.status === null && age > ABANDONED_MS;
      if (age > IDEMPOTENCY_TTL_MS || abandoned) {
        await db
          .deleteFrom('idempotency_keys')
          .where('user_id', '=', userId)
          .where('key', '=', key)
          .where('created_at', '=', stored.created_at)
          .execute();
        continue;
      }
      if (stored.request_hash !== hash) {
        throw new HttpError(
          'idempotency_mismatch',
          'This Idempotency-Key was used with another request (method, path or body) in the last 24 hours; use a new key.',
        );
      }
      if (stored.status === null) {
        throw new HttpError('idempotency_conflict', 'A request with this Idempotency-Key is still being processed; retry shortly.');
      }
      return reply
        .code(stored.status)
        .headers({ ...(stored.headers ?? {}), 'idempotent-replayed': 'true' })
        .send(stored.body ? unseal(userId, header, stored.body) : Buffer.alloc(0));
    }
    throw new HttpError('idempotency_conflict', 'A request with this Idempotency-Key is still being processed; retry shortly.');
  };

  app.addHook('onSend', (request, reply, payload, done) => {
    const taken = request.idempotency;
    if (!taken || reply.getHeader('idempotent-replayed')) return done(null, payload);
    request.idempotency = undefined;
    keep(reply, taken, payload).then(() => done(null, payload), done);
  });
  const keep = async (reply: FastifyReply, taken: NonNullable<FastifyRequest['idempotency']>, payload: unknown) => {
    if (
      reply.statusCode >= 500 ||
      reply.statusCode === 429 ||
      !(typeof payload === 'string' || Buffer.isBuffer(payload) || payload == null)
    ) {
      await db.deleteFrom('idempotency_keys').where('user_id', '=', taken.userId).where('key', '=', taken.key).execute();
      return;
    }
    const headers: Record<string, string> = {};
    for (const name of KEPT_HEADERS) {
      const value = reply.getHeader(name);
      if (value !== undefined) headers[name] = String(value);
    }
    const body = payload == null ? Buffer.alloc(0) : Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
    await db
      .updateTable('idempotency_keys')
      .set({ status: reply.statusCode, headers: JSON.stringify(headers), body: seal(taken.userId, taken.header, body) })
      .where('user_id', '=', taken.userId)
      .where('key', '=', taken.key)
      .execute();
  };
}

/** Deletes keys past their 24 hours (called now and then by the API process). */
async function pruneIdempotencyKeys(db: Db, now: Date): Promise<void> {
  await sql`DELETE FROM idempotency_keys WHERE created_at < ${new Date(now.getTime() - IDEMPOTENCY_TTL_MS)}`.execute(db);
}
