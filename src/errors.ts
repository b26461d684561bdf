/**
 * Errors the domain raises, knowing nothing of HTTP: a closed set of codes, each meaning one kind
 * of refusal. `http/problems.ts` is the one place that turns them into problem details (status,
 * title, type URL); workers and pages read the same codes.
 */
const DOMAIN_ERROR_CODES = [
  /** Fields of the request break a rule; `errors` names each field and what is wrong with it. */
  'validation',
  /** The request as a whole cannot be understood (a malformed form, a body of the wrong shape). */
  'bad_request',
  /** The caller may not do this, or may not touch this user or resource. */
  'forbidden',
  /** The resource does not exist, or was deleted. */
  'not_found',
  /** The request would duplicate something that exists (named in the message). */
  'conflict',
  /** A file or body is larger than the configured limit. */
  'payload_too_large',
] as const;
export type DomainErrorCode = (typeof DOMAIN_ERROR_CODES)[number];
export type FieldErrors = Record<string, string[]>;

export class DomainError extends Error {
  readonly code: DomainErrorCode;
  readonly errors: FieldErrors | undefined;

  constructor(code: DomainErrorCode, message: string, errors?: FieldErrors) {
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.errors = errors;
  }
}

/** The one wording of a resource that does not exist, or was deleted: `Contact 7 does not exist.` */
export function notFound(what: string, id: number): DomainError {
  return new DomainError('not_found', `${what} ${id} does not exist.`);
}

/** An address a write found taken, and free again when the holder was looked for: the caller may simply retry. */
export function addressFreedMeanwhile(email: string | null | undefined): DomainError {
  return new DomainError('conflict', `The email address ${email} is taken and freed again meanwhile; try again.`);
}

/** A refusal naming each field and what is wrong with it; the message counts them like Laravel's. */
export function validationError(errors: FieldErrors): DomainError {
  const fields = Object.keys(errors);
  const message =
    fields.length === 1
      ? `The ${fields[0]} field ${(errors[fields[0] as string] as string[])[0]}.`
      : `${fields.length} fields are invalid.`;
  return new DomainError('validation', message, errors);
}

/** Throws the collected field problems, if there are any, as one validation error. */
export function throwIfAny(errors: FieldErrors): void {
  if (Object.keys(errors).length > 0) throw validationError(errors);
}
