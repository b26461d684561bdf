import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Config } from '../config.ts';

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
  /** Stores the whole stream under `key`, or nothing at all: a reader never sees half a file. */
  put(key: string, source: Readable): Promise<{ size: number }>;
  /** Opens the bytes of `key` (or one range of them); rejects with code ENOENT when there are none. */
  createReadStream(key: string, range?: ByteRange): Promise<Readable>;
  stat(key: string): Promise<{ size: number } | undefined>;
  /** Removes `key`; removing a key that is not there is not an error. */
  delete(key: string): Promise<void>;
}

const SAFE_KEY = /^[A-Za-z0-9_-]+(\/[A-Za-z0-9_-]+)*$/;
const STALE_AFTER_MS = 60 * 60 * 1000;

/** Files in a directory tree under `root`, with temporary files written next to it and renamed into place. */
class LocalDiskStorage implements MediaStorage {
  readonly root: string;
  private readonly tmpDir: string;

  constructor(root: string) {
    this.root = root;
    this.tmpDir = join(root, '.tmp');
  }

  async put(key: string, source: Readable): Promise<{ size: number }> {
    const target = this.pathOf(key);
    await mkdir(this.tmpDir, { recursive: true });
    const temp = join(this.tmpDir, randomUUID());
    try {
      // flush: fsync before close, so the rename below never publishes bytes still in the page cache.
      await pipeline(source, createWriteStream(temp, { flags: 'wx', flush: true }));
      await mkdir(dirname(target), { recursive: true });
      await rename(temp, target);
    } catch (error) {
      await rm(temp, { force: true });
      throw error;
    }
    return { size: (await stat(target)).size };
  }

  async createReadStream(key: string, range?: ByteRange): Promise<Readable> {
    // Opening first turns a missing file into a rejected promise rather than a later stream error.
    const handle = await open(this.pathOf(key), 'r');
    return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  async stat(key: string): Promise<{ size: number } | undefined> {
    try {
      return { size: (await stat(this.pathOf(key))).size };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  /** Removes temporary files a crashed process left behind (anything older than an hour). */
  async sweepTemporaryFiles(): Promise<void> {
    await removeStaleFiles(this.tmpDir);
  }

  private pathOf(key: string): string {
    if (!SAFE_KEY.test(key)) throw new Error(`unsafe media storage key: ${JSON.stringify(key)}`);
    return join(this.root, key);
  }
}

/** The media store the configuration asks for; today the local disk under MEDIA_DIR. */
export async function openMediaStorage(config: Config): Promise<MediaStorage> {
  const storage = new LocalDiskStorage(config.mediaDir);
  await mkdir(storage.root, { recursive: true });
  await storage.sweepTemporaryFiles();
  return storage;
}

/** Deletes the files directly in `dir` untouched for an hour: only a crash leaves them there that long. */
export async function removeStaleFiles(dir: string, olderThanMs = STALE_AFTER_MS): Promise<void> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  const cutoff = Date.now() - olderThanMs;
  for (const name of names) {
    const path = join(dir, name);
    const info = await stat(path).catch(() => undefined);
    if (info?.isFile() && info.mtimeMs < cutoff) await rm(path, { force: true });
  }
}
