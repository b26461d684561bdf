import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyError, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import type { AppContext } from './app-context.ts';
import type { Config } from './config.ts';
import type { DatabaseHandle } from './db/database.ts';
import type { JobQueue } from './db/job-queue.ts';
import type { UserRow } from './db/schema.ts';
import { watchDkimDomain } from './email/domain-watch.ts';
import { registerAuthentication, registerRefusals } from './http/authenticate.ts';
import { registerJsonBodies } from './http/content-types.ts';
import type { App } from './http/fastify-types.ts';
import { PARSER_HEADER_LIMIT, proxyTrust, registerHardening, requestId } from './http/hardening.ts';
import { registerIdempotency } from './http/idempotency.ts';
import { registerMetrics } from './http/metrics.ts';
import { registerOpenApi } from './http/openapi.ts';
import { ownerHook } from './http/owner.ts';
import { clientErrorResponse, HttpError, problemBody, registerProblemHandlers, securityHeaders } from './http/problems.ts';
import { registerRateLimit } from './http/rate-limit.ts';
import { registerRoutes } from './http/routes/index.ts';
import { responseSerializers, validatorCompiler } from './http/validation.ts';
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
  /** Every answer also written by its response schema's serializer and compared (tests; http/validation.ts). */
  checkResponses?: boolean;
  /** How the SES webhook fetches SNS certificates and subscription URLs (tests inject their own). */
  snsFetch?: (url: string) => Promise<string>;
}

const BODY_LIMIT = 1024 * 1024;

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

/**
 * Builds the HTTP application; `service.ts` decides whether and where it listens. Each piece is a
 * plugin of its own; the order of registration is the order a request meets them.
 */
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
  const app = createServer(config, options, secure);

  app.setValidatorCompiler(validatorCompiler);
  app.decorateRequest('owner', null as unknown as UserRow);
  registerJsonBodies(app);
  registerHardening(app, { secure, trustProxy: config.trustProxy });
  await registerAuthentication(app, ctx);
  await registerRateLimit(app, ctx);
  // Authentication's refusals, once the rate limit has counted the request.
  registerRefusals(app, ctx);
  // Routes acting for a user (`config: { owner }`) get that user checked against the access rule.
  app.addHook('preHandler', ownerHook(ctx.database.db));
  registerIdempotency(app, ctx.database.db, ctx.clock);
  registerProblemHandlers(app, { publicUrl: config.publicUrl, bodyLimit: BODY_LIMIT });

  await registerMetrics(app, ctx);
  await registerOpenApi(app, config);
  await registerRoutes(app, ctx);
  await registerPages(app, ctx);
  // DKIM_DOMAIN's records checked at start and daily: a wrong key is logged, and shown on the dashboard.
  const dkimWatch = watchDkimDomain(config, ctx.clock, app.log);
  app.addHook('onClose', async () => dkimWatch.stop());
  return app;
}

/** The Fastify instance: logging, limits, TLS, and the answers to what Node's parser and the router refuse. */
function createServer(config: Config, options: AppOptions, secure: boolean): App {
  const serverOptions = {
    loggerInstance: options.logger ?? createLogger(config, options.logStream),
    logController: new RequestLog(),
    bodyLimit: BODY_LIMIT,
    trustProxy: proxyTrust(config),
    genReqId: (req: IncomingMessage) => requestId(req, randomUUID),
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
    // Errors Node's HTTP parser raises before Fastify sees a request (431, malformed request line).
    clientErrorHandler(error: Error, socket: import('node:net').Socket) {
      const response = clientErrorResponse(config.publicUrl, error, secure);
      if (!response || !socket.writable) return socket.destroy();
      // Ended rather than destroyed, so the answer is not lost to a reset; cut if the client lingers.
      socket.end(response);
      setTimeout(() => socket.destroy(), 1_000).unref();
    },
    // Closing is service.ts's (closeHttp): idle connections are not cut the moment it starts, and
    // requests that arrive meanwhile are served, answered with `Connection: close`.
    forceCloseConnections: false,
    return503OnClosing: false,
    // Answers written by JSON.stringify, checked against their schemas in tests (http/validation.ts).
    schemaController: { compilersFactory: { buildSerializer: responseSerializers(options.checkResponses === true) } },
  };
  return (options.https
    ? Fastify({ ...serverOptions, https: { ...options.https, ...TLS_SERVER_OPTIONS, maxHeaderSize: PARSER_HEADER_LIMIT } })
    : Fastify({ ...serverOptions, http: { maxHeaderSize: PARSER_HEADER_LIMIT } })
  ).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;
}
