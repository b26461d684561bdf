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
  /** The caller asked for this too often; `retryAfterSeconds` says when it may again. */
  'too_many_requests',
] as const;
export type DomainErrorCode = (typeof DOMAIN_ERROR_CODES)[number];
export type FieldErrors = Record<string, string[]>;

export class DomainError extends Error {
  readonly code: DomainErrorCode;
  readonly errors: FieldErrors | undefined;
  /** For `too_many_requests`: how long until the request may be made again. */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: DomainErrorCode, message: string, errors?: FieldErrors, retryAfterSeconds?: number) {
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.errors = errors;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** A limit reached: the request may be made again in `retryAfterSeconds` (at least 1). */
export function tooManyRequests(message: string, retryAfterSeconds: number): DomainError {
  return new DomainError('too_many_requests', message, undefined, Math.max(1, Math.ceil(retryAfterSeconds)));
}

/** The one wording of a resource that does not exist, or was deleted: `Contact 7 does not exist.` */
export function notFound(what: string, id: number): DomainError {
  return new DomainError('not_found', `${what} ${id} does not exist.`);
}

/** An address a write found taken, and free again when the holder was looked for: the caller may simply retry. */
export function addressFreedMeanwhile(email: string | null | undefined): DomainError {
  return new DomainError('conflict', `The email address ${email} is taken and freed again meanwhile; try again.`);
}

/**
 * The one answer to a value another resource already holds (a user's email, a tag's name, a
 * contact's address): a 409 conflict naming the field, whatever the resource.
 */
export function duplicate(field: string, sentence: string, reason: string): DomainError {
  return new DomainError('conflict', sentence, { [field]: [reason] });
}

/**
 * A refusal naming each field and what is wrong with it: the detail is one sentence per field
 * (its first reason), so a client that shows only the detail still says which fields and why.
 */
export function validationError(errors: FieldErrors): DomainError {
  const sentences = Object.entries(errors).map(([field, reasons]) => `${capitalize(fieldPhrase(field))} ${reasons[0]}.`);
  const message = sentences.length === 1 ? (sentences[0] as string) : `${sentences.length} fields are invalid. ${sentences.join(' ')}`;
  return new DomainError('validation', message, errors);
}

/**
 * How a field's path reads in a sentence: `email` is "the email field", `tags.2` "item 3 of
 * tags", `recipients.0.value` "the value field of item 1 of recipients".
 */
function fieldPhrase(path: string): string {
  const item = /^(.+)\.(\d+)$/.exec(path);
  if (item) return `item ${Number(item[2]) + 1} of ${item[1]}`;
  const within = /^(.+)\.(\d+)\.([^.]+)$/.exec(path);
  if (within) return `the ${within[3]} field of item ${Number(within[2]) + 1} of ${within[1]}`;
  return `the ${path} field`;
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Throws the collected field problems, if there are any, as one validation error. */
export function throwIfAny(errors: FieldErrors): void {
  if (Object.keys(errors).length > 0) throw validationError(errors);
}
