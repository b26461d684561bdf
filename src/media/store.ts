import type { Readable } from 'node:stream';

/** An inclusive byte range, as HTTP Range requests count them. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * Where media bytes live. Keys are chosen by Hopper (never by a client) and look like
 * `<user id>/<token>`. The interface is the narrow set an S3-compatible store can also offer
 * (PUT, ranged GET, HEAD, DELETE), so adding one means one more implementation, not a new design.
 */
export interface MediaStorage {
  /**
   * Stores the whole stream under `key`, or nothing at all: a reader never sees half a file.
   * `size`, when the caller knows it, spares a store that needs it up front (S3) reading it first.
   */
  put(key: string, source: Readable, size?: number): Promise<{ size: number }>;
  /** Opens the bytes of `key` (or one range of them); rejects with code ENOENT when there are none. */
  createReadStream(key: string, range?: ByteRange): Promise<Readable>;
  stat(key: string): Promise<{ size: number } | undefined>;
  /** Removes `key`; removing a key that is not there is not an error. */
  delete(key: string): Promise<void>;
}
