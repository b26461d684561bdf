import { createHash } from 'node:crypto';
import rateLimit, { type FastifyRateLimitStore } from '@fastify/rate-limit';
import type { FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import type { AppContext } from '../context.ts';
import type { Db } from '../db/database.ts';
import type { App } from './context.ts';
import { HttpError } from './problems.ts';

/**
 * Requests per minute per API key (`RATE_LIMIT`, default 600), or per client address for requests
 * without one, with `@fastify/rate-limit`. Every response carries `RateLimit-Limit`,
 * `RateLimit-Remaining` and `RateLimit-Reset`; a refusal is a 429 problem with `Retry-After`.
 * The counts are shared by every API process: in PostgreSQL (an unlogged table, fixed one-minute
 * windows, counted in allotments: see postgresStore), or in Redis when `REDIS_URL` is set.
 */
const WINDOW_MS = 60_000;

/** The bearer token's digest (never the token), or the client's address. Independent of how authentication reads it. */
export function rateLimitKey(request: FastifyRequest): string {
  const header = request.headers.authorization;
  const token = typeof header === 'string' && /^Bearer\s+(\S+)$/i.exec(header)?.[1];
  return token ? `key:${createHash('sha256').update(token).digest('base64url').slice(0, 32)}` : `ip:${request.ip}`;
}

/** A key's allotment in the current window: request numbers `next` to `last` are this process's. */
interface Allotment {
  windowStart: number;
  next: number;
  last: number;
  fetching?: Promise<void>;
}

/**
 * A fixed-window counter in PostgreSQL (or PGlite), shared by every API process without a
 * statement per request: a process takes the numbers of the next `chunk` requests of a key at once
 * (one upsert adds `chunk` to the window's count and returns where it stands) and hands them out
 * locally. No window serves more than the limit, whatever the number of processes; a process may
 * hold up to `chunk - 1` numbers unused when the window ends, so with several processes a key may
 * be refused that many requests early. `chunk` is a fiftieth of the limit (12 of 600), and 1 for a
 * limit under 100: exact, statement per request, as small limits are.
 */
function postgresStore(db: Db, now: () => number, limit: number, allotments: Map<string, Allotment>) {
  const chunk = Math.max(1, Math.floor(limit / 50));
  const refill = async (key: string, allotment: Allotment) => {
    const { rows } = await sql<{ count: number }>`
      INSERT INTO rate_limit_counts AS r (key, window_start, count) VALUES (${key}, ${new Date(allotment.windowStart)}, ${chunk})
      ON CONFLICT (key, window_start) DO UPDATE SET count = r.count + ${chunk}
      RETURNING count`.execute(db);
    const count = Number(rows[0]?.count ?? chunk);
    allotment.next = count - chunk + 1;
    allotment.last = count;
  };
  const take = async (key: string, allotment: Allotment): Promise<number> => {
    while (allotment.next > allotment.last) {
      allotment.fetching ??= refill(key, allotment).finally(() => {
        allotment.fetching = undefined;
      });
      await allotment.fetching;
    }
    return allotment.next++;
  };
  return class PostgresStore implements FastifyRateLimitStore {
    incr(key: string, callback: (error: Error | null, result?: { current: number; ttl: number }) => void, timeWindow: number) {
      const at = now();
      const windowStart = at - (at % timeWindow);
      let allotment = allotments.get(key);
      if (!allotment || allotment.windowStart !== windowStart) {
        allotment = { windowStart, next: 1, last: 0 };
        allotments.set(key, allotment);
      }
      take(key, allotment).then(
        (current) => callback(null, { current, ttl: windowStart + timeWindow - at }),
        (error: Error) => callback(error),
      );
    }
    child() {
      return this;
    }
  };
}

export async function registerRateLimit(app: App, ctx: AppContext): Promise<void> {
  const { config } = ctx;
  const db = ctx.database.db;
  const now = () => ctx.clock().getTime();
  const allotments = new Map<string, Allotment>();
  const redis = config.redisUrl ? new Redis(config.redisUrl, { maxRetriesPerRequest: 2, connectTimeout: 5_000 }) : undefined;
  if (redis) app.addHook('onClose', async () => void (await redis.quit()));
  else {
    const prune = setInterval(() => {
      for (const [key, allotment] of allotments) if (allotment.windowStart < now() - WINDOW_MS) allotments.delete(key);
      sql`DELETE FROM rate_limit_counts WHERE window_start < ${new Date(now() - 2 * WINDOW_MS)}`
        .execute(db)
        .catch((error) => app.log.warn({ err: error }, 'pruning rate-limit counts failed'));
    }, WINDOW_MS);
    prune.unref();
    app.addHook('onClose', async () => clearInterval(prune));
  }
  await app.register(rateLimit, {
    global: true,
    max: config.rateLimit,
    timeWindow: WINDOW_MS,
    // After authentication: a malformed or unknown key is refused (401) before any count is kept.
    hook: 'preValidation',
    keyGenerator: rateLimitKey,
    // A count that Redis cannot keep lets the request through. One that PostgreSQL cannot keep is the
    // request's own failure (503 database_unavailable at once): letting it through would only make it
    // wait a second DATABASE_TIMEOUT for its own statements.
    skipOnError: Boolean(redis),
    // The load balancer's probe is never counted: it must say 503 itself when the database is away.
    allowList: (request) => request.routeOptions.url === '/health',
    enableDraftSpec: true,
    addHeaders: { 'ratelimit-limit': true, 'ratelimit-remaining': true, 'ratelimit-reset': true, 'retry-after': true },
    addHeadersOnExceeding: { 'ratelimit-limit': true, 'ratelimit-remaining': true, 'ratelimit-reset': true },
    ...(redis ? { redis, nameSpace: 'hopper-rate-limit-' } : { store: postgresStore(db, now, config.rateLimit, allotments) }),
    errorResponseBuilder: (_request, context) =>
      new HttpError('too_many_requests', `Rate limit of ${context.max} requests per minute exceeded; retry in ${context.after}.`, {
        headers: { 'retry-after': String(Math.max(1, Math.ceil(context.ttl / 1000))) },
      }),
  });
}
