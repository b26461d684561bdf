import type { FastifyError, FastifyRequest } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import { isDatabaseUnavailable } from '../db/errors.ts';
import { DomainError, type DomainErrorCode } from '../errors.ts';
import type { App } from './fastify-types.ts';
import { toValidationError } from './validation.ts';

/**
 * The closed set of problems the API reports, as RFC 9457 problem details with the
 * Laravel-compatible `message` (and `errors` for validation). Domain errors (errors.ts) map onto
 * the codes of the same name; the others belong to HTTP alone. One place to read every error kind.
 */
export const PROBLEMS = {
  validation: { status: 400, title: 'Invalid request' },
  bad_request: { status: 400, title: 'Bad request' },
  unauthorized: { status: 401, title: 'Authentication required' },
  forbidden: { status: 403, title: 'Forbidden' },
  account_cancelled: { status: 403, title: 'Account cancelled' },
  https_required: { status: 403, title: 'HTTPS required' },
  invalid_signature: { status: 403, title: 'Invalid signature' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  request_timeout: { status: 408, title: 'Request timeout' },
  conflict: { status: 409, title: 'Conflict' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  range_not_satisfiable: { status: 416, title: 'Range not satisfiable' },
  request_header_fields_too_large: { status: 431, title: 'Request header fields too large' },
  idempotency_conflict: { status: 409, title: 'Request in progress' },
  idempotency_mismatch: { status: 422, title: 'Idempotency key reused' },
  too_many_requests: { status: 429, title: 'Too many requests' },
  internal: { status: 500, title: 'Internal server error' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
  // 503, not 4xx: every provider (SendGrid, SES, Postmark, Drop Cowboy) retries a 5xx, so events
  // posted before the operator set the secret still arrive once it is set.
  webhook_not_configured: { status: 503, title: 'Webhook not configured' },
  database_unavailable: { status: 503, title: 'Database unavailable' },
} as const satisfies Record<DomainErrorCode, unknown> & Record<string, { status: number; title: string }>;

export type ProblemCode = keyof typeof PROBLEMS;

/** A problem only HTTP knows of (authentication, methods, media types), with headers of its own. */
export class HttpError extends Error {
  readonly code: ProblemCode;
  readonly status: number;
  readonly errors: Record<string, string[]> | undefined;
  readonly headers: Record<string, string>;

  constructor(code: ProblemCode, message: string, options: { errors?: Record<string, string[]>; headers?: Record<string, string> } = {}) {
    super(message);
    this.name = 'HttpError';
    this.code = code;
    this.status = PROBLEMS[code].status;
    this.errors = options.errors;
    this.headers = options.headers ?? {};
  }

  /** The problem a domain error stands for. */
  static from(error: DomainError): HttpError {
    const headers: Record<string, string> = error.retryAfterSeconds === undefined ? {} : { 'Retry-After': String(error.retryAfterSeconds) };
    return new HttpError(error.code, error.message, { errors: error.errors, headers });
  }
}

interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  message: string;
  errors?: Record<string, string[]>;
}

export function problemBody(publicUrl: string, error: HttpError): ProblemBody {
  const body: ProblemBody = {
    type: `${publicUrl}/problems/${error.code}`,
    title: PROBLEMS[error.code].title,
    status: error.status,
    detail: error.message,
    message: error.message,
  };
  if (error.errors) body.errors = error.errors;
  return body;
}

/** Headers every answer carries; HSTS only where the answer reaches the client over HTTPS. */
export function securityHeaders(https: boolean): Record<string, string> {
  const headers: Record<string, string> = { 'X-Content-Type-Options': 'nosniff' };
  if (https) headers['Strict-Transport-Security'] = 'max-age=31536000; includeSubDomains';
  return headers;
}

/**
 * The answer to a request Node's HTTP parser refused before Fastify saw it (a header section over
 * the size limit, a malformed request line, a client too slow to send its headers): a problem+json
 * written straight to the socket, with no body when the request was a HEAD, and the connection
 * closed. Undefined when there is nobody to answer (the client reset the connection).
 */
export function clientErrorResponse(
  publicUrl: string,
  error: NodeJS.ErrnoException & { rawPacket?: Buffer },
  https: boolean,
): string | undefined {
  if (error.code === 'ECONNRESET') return undefined;
  const problem =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? new HttpError('request_header_fields_too_large', 'The request line and headers are larger than the server accepts.')
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new HttpError('request_timeout', 'The request did not arrive in time.')
        : new HttpError('bad_request', 'The request is not well-formed HTTP.');
  // The parser hands over the bytes it failed on: the start of the request unless the headers ran
  // long. When that start is not there, the method is unknown and the answer has no body, which
  // is right for a HEAD and valid for anything else.
  const start = /^([A-Z]{3,7}) /.exec(error.rawPacket?.subarray(0, 8).toString('latin1') ?? '')?.[1];
  const body = start && start !== 'HEAD' ? JSON.stringify(problemBody(publicUrl, problem)) : '';
  const headers = {
    'Content-Type': 'application/problem+json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
    Connection: 'close',
    ...securityHeaders(https),
  };
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  return `HTTP/1.1 ${problem.status} ${PROBLEMS[problem.code].title}\r\n${lines.join('')}\r\n${body}`;
}

const METHODS: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * The one place errors become answers: the error handler turns domain errors, HTTP problems and
 * Fastify's own refusals into problem details (a 5xx carries only an error id; the log the rest),
 * and the not-found handler tells an unknown path (404, naming v3 when another version was asked
 * for) from a known path asked with another method (405 with `Allow`).
 */
export function registerProblemHandlers(app: App, options: { publicUrl: string; bodyLimit: number }): void {
  const { publicUrl } = options;
  // Every route is also put in a method-blind router, so an unknown method on a known path is a 405.
  const knownPaths = FindMyWay();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) knownPaths.on(method as HTTPMethod, route.url, () => {});
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const problem = toHttpError(error, request, options.bodyLimit);
    if (problem.code === 'database_unavailable') {
      request.log.warn({ err: { message: error.message, code: error.code } }, 'database unavailable');
    } else if (problem.code === 'webhook_not_configured') {
      request.log.warn(problem.message);
    } else if (problem.status >= 500) {
      request.log.error({ err: error }, 'request failed');
    } else if (problem.code === 'validation') {
      request.log.info({ errors: problem.errors }, 'invalid request');
    }
    return reply.code(problem.status).headers(problem.headers).type('application/problem+json').send(problemBody(publicUrl, problem));
  });

  app.setNotFoundHandler(async (request) => {
    const path = request.url.split('?')[0] ?? '/';
    const version = /^\/(v\d+)(\/|$)/.exec(path)?.[1];
    if (version && version !== 'v3') {
      throw new HttpError('not_found', `API version ${version} is not supported; v3 is the only supported version (${publicUrl}/v3).`);
    }
    const allowed = METHODS.filter((method) => knownPaths.find(method, path) !== null);
    if (allowed.length > 0) {
      throw new HttpError('method_not_allowed', `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}.`, {
        headers: { Allow: allowed.join(', ') },
      });
    }
    throw new HttpError('not_found', `There is no ${request.method} ${path}. The API lives under /v3; see /docs.`);
  });
}

function toHttpError(err: FastifyError, request: FastifyRequest, bodyLimit: number): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof DomainError) return HttpError.from(err);
  if (err.validation) return HttpError.from(toValidationError(err.validation, err.validationContext));
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new HttpError(
        'payload_too_large',
        `The body is larger than the limit of ${request.routeOptions.bodyLimit ?? bodyLimit} bytes.`,
      );
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new HttpError('unsupported_media_type', acceptedBodies(request));
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

/** What a route's body may be, said to a request with another Content-Type. */
function acceptedBodies(request: FastifyRequest): string {
  const body = (request.routeOptions.schema as { body?: { content?: Record<string, unknown> } } | undefined)?.body;
  const types = body?.content ? Object.keys(body.content) : ['application/json'];
  const sent = String(request.headers['content-type'] ?? '')
    .split(';')[0]
    ?.trim();
  const takes = types.length === 1 ? types[0] : `${types.slice(0, -1).join(', ')} or ${types.at(-1)}`;
  const path = (request.routeOptions.url ?? request.url.split('?')[0] ?? '').replace(/:(\w+)/g, '{$1}');
  return `${request.method} ${path} takes a body of ${takes}; the request's Content-Type is ${sent || 'missing'}.`;
}
