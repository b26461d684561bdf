/**
 * The closed set of problems the API reports, as RFC 9457 problem details with the
 * Laravel-compatible `message` (and `errors` for validation). One place to read every error kind.
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
} as const;

export type ProblemCode = keyof typeof PROBLEMS;
export type FieldErrors = Record<string, string[]>;

export class HttpError extends Error {
  readonly code: ProblemCode;
  readonly status: number;
  readonly errors: FieldErrors | undefined;
  readonly headers: Record<string, string>;

  constructor(code: ProblemCode, message: string, options: { errors?: FieldErrors; headers?: Record<string, string> } = {}) {
    super(message);
    this.name = 'HttpError';
    this.code = code;
    this.status = PROBLEMS[code].status;
    this.errors = options.errors;
    this.headers = options.headers ?? {};
  }
}

/** A 400 naming each field and what is wrong with it; the message counts them like Laravel's. */
export function validationError(errors: FieldErrors): HttpError {
  const fields = Object.keys(errors);
  const message =
    fields.length === 1
      ? `The ${fields[0]} field ${(errors[fields[0] as string] as string[])[0]}.`
      : `${fields.length} fields are invalid.`;
  return new HttpError('validation', message, { errors });
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  message: string;
  errors?: FieldErrors;
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
