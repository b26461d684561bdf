/**
 * Why Hopper refused a media file, whichever way it arrived. The HTTP layer turns `too_large`
 * into a 413 and the others into a 400 naming `field` (`file` for uploads, `full_url` for fetches).
 */
export type MediaRejection = 'too_large' | 'unsupported_type' | 'unreachable';

export class MediaRejectedError extends Error {
  readonly reason: MediaRejection;
  readonly field: string;

  constructor(reason: MediaRejection, field: string, message: string) {
    super(message);
    this.name = 'MediaRejectedError';
    this.reason = reason;
    this.field = field;
  }
}
