import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { realTimeMs } from '../time.ts';
import { DatabaseStorage } from './blob-store.ts';
import { openS3Storage } from './s3-store.ts';
import type { ByteRange, MediaStorage } from './store.ts';

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

/**
 * A shared store (database or bucket) that still serves the files an installation kept on its
 * local disk before it moved: a key the store lacks is looked for under MEDIA_DIR, so nothing
 * breaks between the upgrade and `npm run media:move` (docs/media.md).
 */
class WithDiskFallback implements MediaStorage {
  readonly #store: MediaStorage;
  readonly #disk: LocalDiskStorage;

  constructor(store: MediaStorage, disk: LocalDiskStorage) {
    this.#store = store;
    this.#disk = disk;
  }

  put(key: string, source: Readable, size?: number): Promise<{ size: number }> {
    return this.#store.put(key, source, size);
  }

  async createReadStream(key: string, range?: ByteRange): Promise<Readable> {
    try {
      return await this.#store.createReadStream(key, range);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      return this.#disk.createReadStream(key, range);
    }
  }

  async stat(key: string): Promise<{ size: number } | undefined> {
    return (await this.#store.stat(key)) ?? this.#disk.stat(key);
  }

  async delete(key: string): Promise<void> {
    await this.#store.delete(key);
    await this.#disk.delete(key);
  }
}

/** One store by kind, without the disk fallback: what `npm run media:move` copies from and to. */
export async function openStore(kind: Config['mediaStore'], config: Config, db: Db): Promise<MediaStorage> {
  if (kind === 'postgres') return new DatabaseStorage(db);
  if (kind === 's3') return openS3Storage(config.mediaS3);
  const disk = new LocalDiskStorage(config.mediaDir);
  await mkdir(disk.root, { recursive: true });
  await disk.sweepTemporaryFiles();
  return disk;
}

/**
 * The media store MEDIA_STORE names: the local disk under MEDIA_DIR, the database (the default on
 * PostgreSQL) or an S3-compatible bucket; the shared ones fall back to files left on the disk.
 */
export async function openMediaStorage(config: Config, db: Db): Promise<MediaStorage> {
  const store = await openStore(config.mediaStore, config, db);
  if (config.mediaStore === 'disk') return store;
  return new WithDiskFallback(store, new LocalDiskStorage(config.mediaDir));
}

/** Deletes the files directly in `dir` untouched for an hour: only a crash leaves them there that long. */
export async function removeStaleFiles(dir: string, olderThanMs = STALE_AFTER_MS): Promise<void> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  const cutoff = realTimeMs() - olderThanMs;
  for (const name of names) {
    const path = join(dir, name);
    const info = await stat(path).catch(() => undefined);
    if (info?.isFile() && info.mtimeMs < cutoff) await rm(path, { force: true });
  }
}
