import rateLimit from '@fastify/rate-limit';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { AppContext } from '../app-context.ts';
import type { Db } from '../db/database.ts';
import type { App } from './fastify-types.ts';
import { doneWhen } from './hook-done.ts';
import { HttpError } from './problems.ts';

/**
 * Requests per minute, counted for one identity per request (docs/decisions.md, "Rate limits"):
 * on a route that authenticates, the API key (`RATE_LIMIT`, default 600) and its user across all
 * of their keys (`RATE_LIMIT_PER_USER`, default twice that); everywhere else — public routes,
 * and every request refused as unauthenticated (401) — the client address (after `TRUST_PROXY`).
 * A Bearer token a route does not check counts for nothing, so no token can buy a fresh count.
 *
 * Every answer (a 401 and a 429 too) carries the fields of the current IETF draft,
 * `RateLimit-Policy` and `RateLimit`, and the older `RateLimit-Limit`, `RateLimit-Remaining`,
 * `RateLimit-Reset` of the count nearest its limit; a refusal is a 429 problem with `Retry-After`.
 * The counts are shared by every API process: in PostgreSQL (an unlogged table, fixed one-minute
 * windows, counted in allotments: see postgresStore), or in Redis when `REDIS_URL` is set.
 */
const WINDOW_MS = 60_000;

/** The identity a request is counted against, once authentication has run. */
function rateLimitKey(request: FastifyRequest): string {
  const principal = request.principal;
  return principal?.keyId != null ? `key:${principal.keyId}` : `ip:${request.ip}`;
}

/** A key's allotment in the current window: request numbers `next` to `last` are this process's. */
interface Allotment {
  windowStart: number;
  /** How many numbers one refill takes: a fiftieth of the key's limit, at least 1. */
  chunk: number;
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
function postgresStore(db: Db, now: () => number, allotments: Map<string, Allotment>) {
  const refill = async (key: string, allotment: Allotment) => {
    const chunk = allotment.chunk;
    const { rows } = await sql<{ count: number }>`
      INSERT INTO rate_limit_counts AS r (key, window_start, count) VALUES (${key}, ${new Date(allotment.windowStart)}, ${chunk})
      ON CONFLICT (key, window_start) DO UPDATE SET count = r.count + ${chunk}
      RETURNING count`.execute(db);
    const count = Number(rows[0]?.count ?? chunk);
    allotment.next = count - chunk + 1;
    allotment.last = count;
  };
  const refillThenTake = async (key: string, allotment: Allotment): Promise<number> => {
    while (allotment.next > allotment.last) {
      allotment.fetching ??= refill(key, allotment).finally(() => {
        allotment.fetching = undefined;
      });
      await allotment.fetching;
    }
    return allotment.next++;
  };
  /**
   * The request's number in the key's window and the window's remaining milliseconds: at once
   * while this process holds numbers of the window (nearly always), else after a refill.
   */
  return (key: string, timeWindow: number, max: number): Taken | Promise<Taken> => {
    const at = now();
    const windowStart = at - (at % timeWindow);
    const ttl = windowStart + timeWindow - at;
    let allotment = allotments.get(key);
    if (!allotment || allotment.windowStart !== windowStart) {
      allotment = { windowStart, chunk: Math.max(1, Math.floor(max / 50)), next: 1, last: 0 };
      allotments.set(key, allotment);
    }
    if (allotment.next <= allotment.last) return { current: allotment.next++, ttl };
    return refillThenTake(key, allotment).then((current) => ({ current, ttl }));
  };
}

/** As @fastify/rate-limit's stores answer: the request's number in its window, and the window's time left. */
interface Taken {
  current: number;
  ttl: number;
}

interface Count {
  /** The policy's name in the RateLimit fields. */
  policy: 'key' | 'user' | 'address';
  max: number;
  remaining: number;
  resetSeconds: number;
  exceeded: boolean;
}

export async function registerRateLimit(app: App, ctx: AppContext): Promise<void> {
  const { config } = ctx;
  const db = ctx.database.db;
  const now = () => ctx.clock().getTime();
  const allotments = new Map<string, Allotment>();
  // ioredis is loaded only when it is used: about 5 MB a process without REDIS_URL never needs.
  const redis = config.redisUrl
    ? new (await import('ioredis')).Redis(config.redisUrl, { maxRetriesPerRequest: 2, connectTimeout: 5_000 })
    : undefined;
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
  const take = postgresStore(db, now, allotments);
  // With Redis the plugin keeps the counts; in PostgreSQL this module does (postgresStore). When and
  // against what they are taken is decided below.
  if (redis) {
    await app.register(rateLimit, {
      global: false,
      max: config.rateLimit,
      timeWindow: WINDOW_MS,
      // A count that Redis cannot keep lets the request through. One that PostgreSQL cannot keep is
      // the request's own failure (503 database_unavailable at once): letting it through would only
      // make it wait a second DATABASE_TIMEOUT for its own statements.
      skipOnError: true,
      redis,
      nameSpace: 'hopper-rate-limit-',
    });
  }
  const limiter = (policy: Count['policy'], max: number): Limiter => {
    const counted = ({ current, ttl }: Taken): Count => ({
      policy,
      max,
      remaining: Math.max(0, max - current),
      resetSeconds: Math.ceil(ttl / 1000),
      exceeded: current > max,
    });
    if (!redis) {
      // A request's number is taken without a promise while the process holds numbers of the window.
      return (request) => {
        const taken = take(keyOf(policy, request), WINDOW_MS, max);
        return taken instanceof Promise ? taken.then(counted) : counted(taken);
      };
    }
    const viaPlugin = app.createRateLimit({ max, timeWindow: WINDOW_MS, keyGenerator: (request) => keyOf(policy, request) });
    return async (request) => {
      const result = await viaPlugin(request);
      if (result.isAllowed) return { policy, max, remaining: max, resetSeconds: 0, exceeded: false };
      return { policy, max, remaining: result.remaining, resetSeconds: result.ttlInSeconds, exceeded: result.isExceeded };
    };
  };
  const perAddress = limiter('address', config.rateLimit);
  const perKey = limiter('key', config.rateLimit);
  const perUser = config.rateLimitPerUser > 0 ? limiter('user', config.rateLimitPerUser) : undefined;
  countRequests(app, { perAddress, perKey, perUser }, config);
}

type Limiter = (request: FastifyRequest) => Count | Promise<Count>;

/**
 * The `onRequest` hook that counts every request but /health, after authentication's own
 * (http/authenticate.ts) and before its refusals are answered: synchronous while the process holds
 * numbers of the window (http/hook-done.ts).
 */
function countRequests(
  app: App,
  limiters: { perAddress: Limiter; perKey: Limiter; perUser: Limiter | undefined },
  config: { rateLimit: number; rateLimitPerUser: number },
): void {
  const { perAddress, perKey, perUser } = limiters;
  const policy = (name: Count['policy'], max: number) => `"${name}";q=${max};w=${WINDOW_MS / 1000}`;
  const addressPolicy = policy('address', config.rateLimit);
  const keyPolicies = [policy('key', config.rateLimit), ...(perUser ? [policy('user', config.rateLimitPerUser)] : [])].join(', ');

  /** The request's counts: the key's (or the address's), then its user's; at once while the process holds numbers. */
  const countsOf = (request: FastifyRequest): Count[] | Promise<Count[]> => {
    const keyed = request.principal?.keyId != null;
    const first = keyed ? perKey(request) : perAddress(request);
    // The user's ceiling counts only what the key's own limit let through.
    const withUser = (count: Count): Count[] | Promise<Count[]> => {
      if (!perUser || !keyed || count.exceeded) return [count];
      const second = perUser(request);
      return second instanceof Promise ? second.then((user) => [count, user]) : [count, second];
    };
    return first instanceof Promise ? first.then(withUser) : withUser(first);
  };
  /** The RateLimit fields on the answer, and the 429 of a count past its limit. */
  const answer = (request: FastifyRequest, reply: FastifyReply, counts: Count[]): void => {
    const nearest = counts.reduce((a, b) => ((b.exceeded && !a.exceeded) || b.remaining < a.remaining ? b : a));
    let fields = '';
    for (const c of counts) fields += `${fields ? ', ' : ''}"${c.policy}";r=${c.remaining};t=${c.resetSeconds}`;
    reply
      .header('RateLimit-Policy', request.principal?.keyId != null ? keyPolicies : addressPolicy)
      .header('RateLimit', fields)
      .header('RateLimit-Limit', String(nearest.max))
      .header('RateLimit-Remaining', String(nearest.remaining))
      .header('RateLimit-Reset', String(nearest.resetSeconds));
    const over = counts.find((c) => c.exceeded);
    if (over) {
      const retryAfter = Math.max(1, over.resetSeconds);
      const whose =
        over.policy === 'user' ? "per user, across all of the user's keys" : over.policy === 'key' ? 'per API key' : 'per client address';
      throw new HttpError(
        'too_many_requests',
        `Rate limit of ${over.max} requests per minute ${whose} exceeded; retry in ${retryAfter} s.`,
        {
          headers: { 'Retry-After': String(retryAfter) },
        },
      );
    }
  };

  app.addHook('onRequest', (request, reply, done) => {
    // The load balancer's probe is never counted: it must say 503 itself when the database is away.
    if (request.routeOptions.url === '/health') return done();
    const counts = countsOf(request);
    if (counts instanceof Promise)
      return doneWhen(
        counts.then((taken) => answer(request, reply, taken)),
        done,
      );
    answer(request, reply, counts);
    done();
  });
}

function keyOf(policy: Count['policy'], request: FastifyRequest): string {
  if (policy === 'user') return `user:${request.principal.userId}`;
  return rateLimitKey(request);
}
