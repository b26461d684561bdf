import { randomUUID } from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyError, type FastifyReply, type FastifyRequest } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { Config } from './config.ts';
import type { AppContext } from './context.ts';
import type { DatabaseHandle } from './db/database.ts';
import type { JobQueue } from './db/job-queue.ts';
import type { UserRow } from './db/schema.ts';
import { DomainError, validationError } from './errors.ts';
import { authenticate } from './http/authenticate.ts';
import type { App } from './http/context.ts';
import { registerOpenApi } from './http/openapi.ts';
import { ownerHook } from './http/owner.ts';
import { HttpError, problemBody } from './http/problems.ts';
import { registerRoutes } from './http/routes/index.ts';
import { toValidationError, validatorCompiler } from './http/validation.ts';
import type { Principal } from './identity/access.ts';
import { createLogger, type Logger } from './log.ts';
import { type Clock, systemClock } from './time.ts';
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
}

const BODY_LIMIT = 1024 * 1024;
const SANE_REQUEST_ID = /^[\w.:-]{1,128}$/;
const METHODS: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const DB_UNREACHABLE = /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH|57P0[1-3]|08\w{3})$/;

/** Builds the HTTP application; `main.ts` decides whether and where it listens. */
export async function buildApp(config: Config, options: AppOptions): Promise<App> {
  const ctx: AppContext = { config, database: options.database, queue: options.queue, clock: options.clock ?? systemClock };
  const serverOptions = {
    loggerInstance: options.logger ?? createLogger(config, options.logStream),
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
        .type('application/problem+json')
        .send(problemBody(config.publicUrl, new HttpError('bad_request', message)));
    },
    forceCloseConnections: 'idle' as const,
    return503OnClosing: true,
  };
  const app = (options.https
    ? Fastify({ ...serverOptions, https: options.https })
    : Fastify(serverOptions)
  ).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;

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

  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id);
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

  // Every route is also put in a method-blind router, so an unknown method on a known path is a 405.
  const knownPaths = FindMyWay();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) knownPaths.on(method as HTTPMethod, route.url, () => {});
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const problem = toHttpError(error);
    if (problem.status >= 500) {
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
      if (DB_UNREACHABLE.test(String(err.code ?? ''))) {
        return new HttpError('service_unavailable', `The database is unreachable; try again shortly (error id ${request.id}).`, {
          headers: { 'Retry-After': '5' },
        });
      }
      return new HttpError('internal', `The server could not process the request (error id ${request.id}).`);
    }
  });

  app.setNotFoundHandler(async (request) => {
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

function hasNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (Array.isArray(value)) return value.some(hasNul);
  if (value && typeof value === 'object') return Object.entries(value).some(([k, v]) => k.includes('\u0000') || hasNul(v));
  return false;
}
