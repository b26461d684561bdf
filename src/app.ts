import { randomUUID } from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyError, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { Config } from './config.ts';
import type { AppContext } from './context.ts';
import type { DatabaseHandle } from './db/database.ts';
import { isDatabaseUnavailable } from './db/errors.ts';
import type { JobQueue } from './db/job-queue.ts';
import type { UserRow } from './db/schema.ts';
import { DomainError, validationError } from './errors.ts';
import { authenticate, cachePrincipals, settlePrincipalsAfterWrite } from './http/authenticate.ts';
import type { App } from './http/context.ts';
import { registerIdempotency } from './http/idempotency.ts';
import { registerMetrics } from './http/metrics.ts';
import { registerOpenApi } from './http/openapi.ts';
import { ownerHook } from './http/owner.ts';
import { clientErrorResponse, HttpError, problemBody, securityHeaders } from './http/problems.ts';
import { registerRateLimit } from './http/rate-limit.ts';
import { registerRoutes } from './http/routes/index.ts';
import { lazySerializers, toValidationError, validatorCompiler } from './http/validation.ts';
import type { Principal } from './identity/access.ts';
import { createLogger, type Logger } from './log.ts';
import { type Clock, systemClock } from './time.ts';
import { TLS_SERVER_OPTIONS } from './tls.ts';
import { registerPages } from './web/index.ts';

export interface AppOptions {
  database: DatabaseHandle;
  queue: JobQueue;
  clock?: Clock;
  /** TLS material; absent when TRUST_PROXY puts a TLS-terminating proxy in front, or for inject-only tests. */
  https?: { key: string | Buffer; cert: string | Buffer };
  /** The process's logger (shared with the workers); made here when absent. */
  logger?: Logger;
  /** Where log lines go when the logger is made here (tests capture them); stdout by default. */
  logStream?: NodeJS.WritableStream;
  /** How the SES webhook fetches SNS certificates and subscription URLs (tests inject their own). */
  snsFetch?: (url: string) => Promise<string>;
}

const BODY_LIMIT = 1024 * 1024;
/**
 * The request line and headers may take HEADER_LIMIT bytes; Node's parser lets four times that
 * through so that the refusal (431) is made here, where the method is known — a HEAD gets no body —
 * rather than by the parser (clientErrorResponse, for what is larger still).
 */
const HEADER_LIMIT = 16 * 1024;
const PARSER_HEADER_LIMIT = 4 * HEADER_LIMIT;
const SANE_REQUEST_ID = /^[\w.:-]{1,128}$/;
const METHODS: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * One log line per request at `info`, written when it is answered and carrying the request, the
 * status and the time taken; the line at its arrival only at `debug`. Fastify's default is both at
 * `info`, which doubled the logging cost of a read (docs/performance.md).
 */
class RequestLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

/** Builds the HTTP application; `service.ts` decides whether and where it listens. */
export async function buildApp(config: Config, options: AppOptions): Promise<App> {
  // Requests use the database with bounded waits: one that is down or frozen answers 503 quickly.
  const database: DatabaseHandle = { ...options.database, db: options.database.requestDb };
  const ctx: AppContext = {
    config,
    database,
    queue: options.queue,
    clock: options.clock ?? systemClock,
    ...(options.snsFetch ? { snsFetch: options.snsFetch } : {}),
  };
  // Answers reach clients over HTTPS: served with TLS here, or through the TLS-terminating proxy.
  const secure = Boolean(options.https) || config.trustProxy;
  const serverOptions = {
    loggerInstance: options.logger ?? createLogger(config, options.logStream),
    logController: new RequestLog(),
    bodyLimit: BODY_LIMIT,
    trustProxy: config.trustProxy,
    genReqId: (req: { headers: Record<string, string | string[] | undefined> }) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : randomUUID();
    },
    // Errors the router raises before any hook runs (a malformed URL, an absurdly long id) get
    // the same problem+json shape as everything else.
    frameworkErrors: (error: FastifyError, _request: FastifyRequest, reply: FastifyReply) => {
      const message = error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'A path parameter is too long.' : 'The URL is malformed.';
      reply
        .code(400)
        .headers(securityHeaders(secure))
        .type('application/problem+json')
        .send(problemBody(config.publicUrl, new HttpError('bad_request', message)));
    },
    // While closing, requests that arrive on kept-alive connections are still served, answered with
    // `Connection: close` (service.ts closes the database only after HTTP has drained).
    // Errors Node's HTTP parser raises before Fastify sees a request (431, malformed request line).
    clientErrorHandler(error: Error, socket: import('node:net').Socket) {
      const response = clientErrorResponse(config.publicUrl, error, secure);
      if (!response || !socket.writable) return socket.destroy();
      // Ended rather than destroyed, so the answer is not lost to a reset; cut if the client lingers.
      socket.end(response);
      setTimeout(() => socket.destroy(), 1_000).unref();
    },
    forceCloseConnections: 'idle' as const,
    return503OnClosing: false,
    // Response serializers compiled on a route's first answer, not at start (http/validation.ts).
    schemaController: { compilersFactory: { buildSerializer: lazySerializers } },
  };
  const app = (options.https
    ? Fastify({ ...serverOptions, https: { ...options.https, ...TLS_SERVER_OPTIONS, maxHeaderSize: PARSER_HEADER_LIMIT } })
    : Fastify({ ...serverOptions, http: { maxHeaderSize: PARSER_HEADER_LIMIT } })
  ).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;

  await cachePrincipals(ctx.database);
  app.addHook('onSend', async (request, reply, payload) => {
    await settlePrincipalsAfterWrite(ctx.database.db, request.method, request.routeOptions.url, reply.statusCode);
    return payload;
  });
  app.setValidatorCompiler(validatorCompiler);
  app.decorateRequest('principal', null as unknown as Principal);
  app.decorateRequest('owner', null as unknown as UserRow);

  // An empty body on a JSON request (a bodiless POST from curl -H 'Content-Type: application/json')
  // means "no body"; anything else must parse.
  // Only JSON is accepted: without the text parser Fastify would hand plain text to the handlers.
  app.removeContentTypeParser('text/plain');
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    parseJson(request, body as string, (error, value) => {
      // PostgreSQL text cannot hold NUL: refuse it here rather than fail in the database.
      if (!error && hasNul(value))
        return done(new HttpError('bad_request', 'Strings must not contain NUL (\\u0000) characters.'), undefined);
      done(error, value);
    });
  });

  const always = securityHeaders(secure);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id);
    reply.headers(always);
    // A request target never carries a fragment; the router would drop `#…` and act on what is
    // left (`/v3/api_keys/1#x` on key 1).
    if (request.raw.url?.includes('#')) {
      throw new HttpError('bad_request', 'The URL must not contain "#": a fragment is never sent to a server (percent-encode it as %23).');
    }
    if (headerBytes(request.raw) > HEADER_LIMIT) {
      throw new HttpError('request_header_fields_too_large', `The request line and headers are larger than ${HEADER_LIMIT / 1024} KiB.`);
    }
    if (config.trustProxy && request.url !== '/health') {
      const proto = String(request.headers['x-forwarded-proto'] ?? '')
        .split(',')[0]
        ?.trim();
      if (proto !== 'https') {
        throw new HttpError('https_required', 'This API is served over HTTPS only; repeat the request with https://.');
      }
    }
    const route = request.routeOptions;
    if (!route.url?.startsWith('/v3/') || route.config.public) return;
    request.principal = await authenticate(request, ctx.database.db, config, ctx.clock);
  });

  // Path ids are digits only: the validator would read "1e3" or " 7" as numbers.
  app.addHook('preValidation', async (request) => {
    const params = (request.params ?? {}) as Record<string, string>;
    const bad = Object.keys(params).filter((name) => (name === 'id' || name.endsWith('_id')) && !/^\d{1,16}$/.test(params[name] ?? ''));
    if (bad.length > 0) throw validationError(Object.fromEntries(bad.map((name) => [name, ['must be a positive integer']])));
  });

  // Routes acting for a user (`config: { owner }`) get that user checked against the access rule.
  app.addHook('preHandler', ownerHook(ctx.database.db));
  registerIdempotency(app, ctx.database.db, ctx.clock);

  // Every route is also put in a method-blind router, so an unknown method on a known path is a 405.
  const knownPaths = FindMyWay();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) knownPaths.on(method as HTTPMethod, route.url, () => {});
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const problem = toHttpError(error);
    if (problem.code === 'database_unavailable') {
      request.log.warn({ err: { message: error.message, code: error.code } }, 'database unavailable');
    } else if (problem.code === 'webhook_not_configured') {
      request.log.warn(problem.message);
    } else if (problem.status >= 500) {
      request.log.error({ err: error }, 'request failed');
    } else if (problem.code === 'validation') {
      request.log.info({ errors: problem.errors }, 'invalid request');
    }
    return reply
      .code(problem.status)
      .headers(problem.headers)
      .type('application/problem+json')
      .send(problemBody(config.publicUrl, problem));

    function toHttpError(err: FastifyError): HttpError {
      if (err instanceof HttpError) return err;
      if (err instanceof DomainError) return HttpError.from(err);
      if (err.validation) return HttpError.from(toValidationError(err.validation, err.validationContext));
      switch (err.code) {
        case 'FST_ERR_CTP_BODY_TOO_LARGE':
          return new HttpError(
            'payload_too_large',
            `The body is larger than the limit of ${request.routeOptions.bodyLimit ?? BODY_LIMIT} bytes.`,
          );
        case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
          return new HttpError('unsupported_media_type', 'Send the body as JSON with the header Content-Type: application/json.');
        case 'FST_ERR_CTP_INVALID_JSON_BODY':
          return new HttpError('bad_request', 'The body is not valid JSON.');
      }
      if (err instanceof SyntaxError || (err.statusCode === 400 && err.code?.startsWith('FST_ERR_CTP'))) {
        return new HttpError('bad_request', `The body is not valid JSON: ${err.message}`);
      }
      if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
        return new HttpError(err.statusCode === 404 ? 'not_found' : 'bad_request', err.message);
      }
      if (isDatabaseUnavailable(err)) {
        return new HttpError('database_unavailable', `The database is unreachable; try again shortly (error id ${request.id}).`, {
          headers: { 'Retry-After': '5' },
        });
      }
      return new HttpError('internal', `The server could not process the request (error id ${request.id}).`);
    }
  });

  await registerRateLimit(app, ctx);
  await registerMetrics(app, ctx);
  app.setNotFoundHandler({ preHandler: app.rateLimit() }, async (request) => {
    const path = request.url.split('?')[0] ?? '/';
    const version = /^\/(v\d+)(\/|$)/.exec(path)?.[1];
    if (version && version !== 'v3') {
      throw new HttpError(
        'not_found',
        `API version ${version} is not supported; v3 is the only supported version (${config.publicUrl}/v3).`,
      );
    }
    const allowed = METHODS.filter((method) => knownPaths.find(method, path) !== null);
    if (allowed.length > 0) {
      throw new HttpError('method_not_allowed', `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}.`, {
        headers: { Allow: allowed.join(', ') },
      });
    }
    throw new HttpError('not_found', `There is no ${request.method} ${path}. The API lives under /v3; see /docs.`);
  });

  await registerOpenApi(app, config);
  await registerRoutes(app, ctx);
  await registerPages(app, ctx);
  return app;
}

function headerBytes(raw: { url?: string; method?: string; rawHeaders: string[] }): number {
  let n = (raw.method?.length ?? 0) + (raw.url?.length ?? 0) + 12;
  for (const part of raw.rawHeaders) n += part.length + 2;
  return n;
}

function hasNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (Array.isArray(value)) return value.some(hasNul);
  if (value && typeof value === 'object') return Object.entries(value).some(([k, v]) => k.includes('\u0000') || hasNul(v));
  return false;
}
