import type { DomainError, DomainErrorCode } from '../errors.ts';

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
  webhook_not_configured: { status: 403, title: 'Webhook not configured' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  range_not_satisfiable: { status: 416, title: 'Range not satisfiable' },
  internal: { status: 500, title: 'Internal server error' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
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
    return new HttpError(error.code, error.message, { errors: error.errors });
  }
}

export interface ProblemBody {
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
