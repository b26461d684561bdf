import { randomUUID, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import { hashApiKey, parseApiKey } from '../api-key-format.ts';
import type { AppContext } from '../app-context.ts';
import type { Config } from '../config.ts';
import { channelOfSession } from '../db/channels.ts';
import type { DatabaseHandle, Db } from '../db/database.ts';
import type { UserRow } from '../db/schema.ts';
import type { Principal } from '../identity/access.ts';
import { findKeyOwner, touchApiKey } from '../identity/api-keys.ts';
import { rankOf } from '../identity/roles.ts';
import { type Clock, formatTimestamp } from '../time.ts';
import type { App } from './fastify-types.ts';
import { doneWhen } from './hook-done.ts';
import { HttpError } from './problems.ts';

/** `last_used_at` is written at most once a minute per key, so reads stay read-only on the hot path. */
const LAST_USED_GRANULARITY_MS = 60_000;
const READ_AND_DELETE = new Set(['GET', 'HEAD', 'DELETE']);

type KeyOwner = NonNullable<Awaited<ReturnType<typeof findKeyOwner>>>;

/** How long a principal write waits for its own notice to come back before answering anyway. */
const SETTLE_TIMEOUT_MS = 2_000;

/**
 * The owners of recently used keys, per database, so that a request costs no look-up. Correct
 * only while notices arrive: every change to a key or a user (revoked, deleted, cancelled, other
 * roles or team) NOTIFYs every process at commit (db/migrations/0011), and the whole cache is
 * forgotten. While the listening connection is down nothing is cached or served from the cache.
 *
 * "A revoked key fails on the very next request", in every process: a write through the API that
 * may change a principal is answered only once every listening process has acknowledged a notice
 * sent after the write committed (`settle`). Notices reach each listener in commit order, so a
 * process that acknowledges has already forgotten what the write changed. A process that does not
 * answer within SETTLE_TIMEOUT_MS (frozen, cut off) does not hold the answer back any longer.
 */
class PrincipalCache {
  readonly #entries = new Map<string, KeyOwner>();
  /** Settles waiting for acknowledgements: token → called once per acknowledgement. */
  readonly #waiting = new Map<string, () => void>();
  #generation = 0;
  readonly #database: DatabaseHandle;
  readonly #listening: () => boolean;

  constructor(database: DatabaseHandle, listening: () => boolean) {
    this.#database = database;
    this.#listening = listening;
  }

  /** A notice (or a lost listener, `payload` undefined): everything cached may be stale. */
  noticed(payload: string | undefined): void {
    if (payload?.startsWith('ack:')) {
      this.#waiting.get(payload.slice(4))?.();
      return;
    }
    this.#generation++;
    this.#entries.clear();
    if (payload?.startsWith('settle:')) {
      // Forgotten above: say so to the process that waits.
      sql`SELECT pg_notify(${PRINCIPALS}, ${`ack:${payload}`})`.execute(this.#database.db).catch(() => {});
    }
  }

  /** Forgets everything now, then waits (bounded) until every listening process has forgotten too. */
  async settle(): Promise<void> {
    this.noticed(undefined);
    if (!this.#listening()) return;
    const db = this.#database.db;
    const token = `settle:${randomUUID()}`;
    let acknowledged = 0;
    let expected = 1;
    let done: () => void = () => {};
    const heard = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, SETTLE_TIMEOUT_MS);
      done = () => {
        clearTimeout(timer);
        resolve();
      };
      this.#waiting.set(token, () => {
        if (++acknowledged >= expected) done();
      });
    });
    try {
      // Every process of this installation listening on the database (PGlite: this one alone).
      if (this.#database.kind === 'postgres') {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND query = 'LISTEN "' || ${PRINCIPALS} || '"'`.execute(db);
        expected = Math.max(1, rows[0]?.n ?? 1);
      }
      await sql`SELECT pg_notify(${PRINCIPALS}, ${token})`.execute(db);
      if (acknowledged >= expected) done();
      await heard;
    } catch {
      // The database is failing: the write's own answer stands; nothing is served from the cache
      // while the listener is down.
    } finally {
      this.#waiting.delete(token);
    }
  }

  async find(db: Db, digest: Buffer): Promise<KeyOwner | undefined> {
    if (!this.#listening()) return findKeyOwner(db, digest);
    // A notice already received is handled before the cache is consulted.
    await new Promise((resolve) => setImmediate(resolve));
    const key = digest.toString('base64');
    const known = this.#entries.get(key);
    if (known) return known;
    const generation = this.#generation;
    const owner = await findKeyOwner(db, digest);
    // A change noticed while the look-up ran may have made its answer stale: it is not kept.
    if (owner && generation === this.#generation && this.#listening()) {
      if (this.#entries.size >= MAX_CACHED) this.#entries.clear();
      this.#entries.set(key, owner);
    }
    return owner;
  }
}

const MAX_CACHED = 10_000;
/** The installation's channel of principal changes, in a statement (db/channels.ts). */
const PRINCIPALS = channelOfSession('hopper_principals');
const caches = new WeakMap<Db, PrincipalCache>();

/** Lets `authenticate` keep principals for this database, forgotten on every change (see PrincipalCache). */
async function cachePrincipals(database: DatabaseHandle): Promise<void> {
  if (caches.has(database.db)) return;
  let cache: PrincipalCache | undefined;
  const { listening } = await database.listen('hopper_principals', (payload) => cache?.noticed(payload));
  cache = new PrincipalCache(database, listening);
  caches.set(database.db, cache);
}

/**
 * Writes that can change who a key stands for: revoking a key (DELETE /v3/api_keys/{id}), changing or cancelling a user
 * (API or account settings).
 */
const PRINCIPAL_WRITES = /^\/(?:v3\/api_keys\/|v3\/users\/[^/]+(?:\/cancel)?$|account\/)/;

/**
 * A successful write that may change a principal (see PRINCIPAL_WRITES): before it is answered,
 * this process's principals are forgotten and every process is told (PrincipalCache.settle).
 */
function mayChangePrincipals(method: string, routeUrl: string | undefined, status: number): boolean {
  if (method === 'GET' || method === 'HEAD') return false;
  return status < 400 && routeUrl !== undefined && PRINCIPAL_WRITES.test(routeUrl);
}

function unauthorized(message: string, error?: 'invalid_token'): HttpError {
  const challenge = error ? `Bearer realm="hopper", error="${error}"` : 'Bearer realm="hopper"';
  return new HttpError('unauthorized', message, { headers: { 'WWW-Authenticate': challenge } });
}

/**
 * Who sends a request: the user behind its Bearer key, or a 401 problem to answer. A key whose
 * form or checksum is wrong is refused before any database work.
 */
async function identify(request: FastifyRequest, db: Db, clock: Clock): Promise<Principal | HttpError> {
  const header = request.headers.authorization;
  if (!header) return unauthorized('Send your API key in the header Authorization: Bearer <API key>.');
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match) return unauthorized('The Authorization header must use the Bearer scheme: Authorization: Bearer <API key>.', 'invalid_token');
  const key = parseApiKey(match[1] as string);
  if (!key) return unauthorized('The API key is malformed: check that it was copied whole.', 'invalid_token');

  const digest = hashApiKey(key);
  const cache = caches.get(db);
  const owner = cache ? await cache.find(db, digest) : await findKeyOwner(db, digest);
  if (!owner || !timingSafeEqual(owner.key_hash, digest))
    return unauthorized('The API key is unknown or has been revoked.', 'invalid_token');

  const now = clock();
  if (!owner.last_used_at || now.getTime() - owner.last_used_at.getTime() >= LAST_USED_GRANULARITY_MS) {
    await touchApiKey(db, owner.key_id, now);
    owner.last_used_at = now;
  }
  const { user } = owner;
  return { userId: user.id, teamId: user.team_id, rank: rankOf(user.roles), keyId: owner.key_id, user };
}

/**
 * The account's state: a cancelled account keeps reads and deletes for the grace period (so its
 * owner can take data out), then loses everything.
 */
function refuseCancelled(user: UserRow, method: string, config: Config, now: Date): void {
  if (user.status !== 'Cancelled' || !user.cancelled_at) return;
  const graceEnds = new Date(user.cancelled_at.getTime() + config.gracePeriodMs);
  const cancelled = formatTimestamp(user.cancelled_at);
  if (now >= graceEnds) {
    throw new HttpError(
      'account_cancelled',
      `This account was cancelled at ${cancelled} and its grace period ended at ${formatTimestamp(graceEnds)}.`,
    );
  }
  if (!READ_AND_DELETE.has(method)) {
    throw new HttpError(
      'account_cancelled',
      `This account was cancelled at ${cancelled} and is read-only until ${formatTimestamp(graceEnds)}: reads and deletes still work so you can take your data out.`,
    );
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Why a request to a route that needs a key is refused (401), answered once the rate limit has counted it. */
    authenticationFailure: HttpError | null;
  }
}

/**
 * Bearer authentication for every `/v3` route not marked `public`, in two steps around the rate
 * limit (http/rate-limit.ts): this `onRequest` hook finds the principal (or the refusal), so that
 * the limit counts the request against its key — or, refused, against its address; then
 * `registerRefusals`'s, registered after the limit's, answers the refusal or a cancelled
 * account's 403, before any body is read.
 */
export async function registerAuthentication(app: App, ctx: AppContext): Promise<void> {
  const { db } = ctx.database;
  await cachePrincipals(ctx.database);
  app.decorateRequest('principal', null as unknown as Principal);
  app.decorateRequest('authenticationFailure', null);
  app.addHook('onRequest', (request, _reply, done) => {
    const route = request.routeOptions;
    if (!route.url?.startsWith('/v3/') || route.config.public) return done();
    doneWhen(
      identify(request, db, ctx.clock).then((found) => {
        if (found instanceof HttpError) request.authenticationFailure = found;
        else request.principal = found;
      }),
      done,
    );
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    const cache = caches.get(db);
    if (!cache || !mayChangePrincipals(request.method, request.routeOptions.url, reply.statusCode)) return done(null, payload);
    cache.settle().then(() => done(null, payload), done);
  });
}

/**
 * The refusals of authentication (a 401, a cancelled account's 403), answered in an `onRequest`
 * hook registered after the rate limit's, so that a refused request is counted too (see
 * registerAuthentication).
 */
export function registerRefusals(app: App, ctx: AppContext): void {
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.authenticationFailure) throw request.authenticationFailure;
    if (request.principal?.user) refuseCancelled(request.principal.user, request.method, ctx.config, ctx.clock());
    done();
  });
}
