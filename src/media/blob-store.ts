import { Readable } from 'node:stream';
import type { Db } from '../db/database.ts';
import type { ByteRange, MediaStorage } from './store.ts';

/** Bytes per stored part: a 20 MiB file is 80 rows, and a range request reads only the parts it covers. */
const PART_BYTES = 256 * 1024;
/** Parts fetched per statement while streaming: 1 MiB in memory at most per reader. */
const PARTS_PER_READ = 4;

const asBuffer = (bytes: Uint8Array) => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));

/**
 * Media bytes in the database itself (`media_blobs`, migration 0034), so that every API process of
 * one installation serves every file. A file is written in one transaction (all of it or none),
 * and read a few parts at a time, so neither side holds a whole file in memory.
 */
export class DatabaseStorage implements MediaStorage {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  async put(key: string, source: Readable): Promise<{ size: number }> {
    return this.#db.transaction().execute(async (trx) => {
      await trx.deleteFrom('media_blobs').where('storage_key', '=', key).execute();
      let size = 0;
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      const flush = async (bytes: Buffer) => {
        await trx.insertInto('media_blobs').values({ storage_key: key, byte_offset: size, bytes }).execute();
        size += bytes.length;
      };
      for await (const chunk of source) {
        const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
        pending.push(buffer);
        pendingBytes += buffer.length;
        while (pendingBytes >= PART_BYTES) {
          const joined = Buffer.concat(pending, pendingBytes);
          await flush(joined.subarray(0, PART_BYTES));
          const rest = joined.subarray(PART_BYTES);
          pending = rest.length > 0 ? [rest] : [];
          pendingBytes = rest.length;
        }
      }
      // An empty file is still one (empty) part: a key with no rows is a missing file.
      if (pendingBytes > 0 || size === 0) await flush(Buffer.concat(pending, pendingBytes));
      return { size };
    });
  }

  async createReadStream(key: string, range?: ByteRange): Promise<Readable> {
    const start = range?.start ?? 0;
    const end = range?.end ?? Number.MAX_SAFE_INTEGER;
    // The part holding `start` is the last one beginning at or before it.
    const first = await this.#db
      .selectFrom('media_blobs')
      .select('byte_offset')
      .where('storage_key', '=', key)
      .where('byte_offset', '<=', start)
      .orderBy('byte_offset', 'desc')
      .limit(1)
      .executeTakeFirst();
    if (!first) throw Object.assign(new Error(`no media stored under ${key}`), { code: 'ENOENT' });
    const db = this.#db;
    async function* parts() {
      let from = first?.byte_offset ?? 0;
      while (from <= end) {
        const rows = await db
          .selectFrom('media_blobs')
          .select(['byte_offset', 'bytes'])
          .where('storage_key', '=', key)
          .where('byte_offset', '>=', from)
          .where('byte_offset', '<=', end)
          .orderBy('byte_offset')
          .limit(PARTS_PER_READ)
          .execute();
        for (const row of rows) {
          const bytes = asBuffer(row.bytes);
          const offset = Number(row.byte_offset);
          const slice = bytes.subarray(Math.max(0, start - offset), Math.min(bytes.length, end - offset + 1));
          if (slice.length > 0) yield slice;
          from = offset + bytes.length;
        }
        if (rows.length < PARTS_PER_READ) return;
      }
    }
    return Readable.from(parts(), { objectMode: false });
  }

  async stat(key: string): Promise<{ size: number } | undefined> {
    const row = await this.#db
      .selectFrom('media_blobs')
      .select((eb) => [
        eb.fn.countAll<number>().as('parts'),
        eb.fn.sum<string | number | null>(eb.fn('octet_length', ['bytes'])).as('size'),
      ])
      .where('storage_key', '=', key)
      .executeTakeFirstOrThrow();
    return Number(row.parts) > 0 ? { size: Number(row.size ?? 0) } : undefined;
  }

  async delete(key: string): Promise<void> {
    await this.#db.deleteFrom('media_blobs').where('storage_key', '=', key).execute();
  }
}
