import { DomainError, validationError } from '../errors.ts';

/**
 * Why Hopper refused a media file, whichever way it arrived: too large is `payload_too_large`,
 * anything else a validation error naming `field` (`file` for uploads, `full_url` for fetches).
 */
type MediaRejection = 'too_large' | 'unsupported_type' | 'unreachable';

export function mediaRejected(reason: MediaRejection, field: string, message: string): DomainError {
  return reason === 'too_large' ? new DomainError('payload_too_large', message) : validationError({ [field]: [message] });
}
