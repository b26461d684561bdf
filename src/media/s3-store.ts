import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import type { Config } from '../config.ts';
import type { ByteRange, MediaStorage } from './store.ts';

type S3Module = typeof import('@aws-sdk/client-s3');

/** What S3 (and compatible servers) say for an object that is not there. */
function isMissing(error: unknown): boolean {
  const e = error as { name?: string; Code?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.Code === 'NoSuchKey' || e?.$metadata?.httpStatusCode === 404;
}

const missing = (key: string) => Object.assign(new Error(`no media stored under ${key}`), { code: 'ENOENT' });

/**
 * Media bytes in an S3-compatible bucket (MEDIA_STORE=s3), through the AWS SDK: credentials come
 * from its usual chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, an instance role).
 * A PUT publishes the object whole or not at all, as S3 does; a range is S3's own ranged GET.
 */
class S3Storage implements MediaStorage {
  readonly #s3: S3Module;
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #prefix: string;

  constructor(s3: S3Module, client: S3Client, bucket: string, prefix: string) {
    this.#s3 = s3;
    this.#client = client;
    this.#bucket = bucket;
    this.#prefix = prefix;
  }

  async put(key: string, source: Readable, size?: number): Promise<{ size: number }> {
    // S3 needs the length of a streamed body up front; a body of unknown length is read first
    // (media files are MEDIA_MAX_BYTES at most).
    let body: Readable | Buffer = source;
    let length = size;
    if (length === undefined) {
      const chunks: Buffer[] = [];
      for await (const chunk of source) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      body = Buffer.concat(chunks);
      length = body.length;
    }
    // A source that fails midway (a client gone) must end the upload, not leave it waiting for the
    // rest: S3 then keeps nothing, as an object appears only once its PUT completes.
    const abort = new AbortController();
    let failure: unknown;
    const onError = (error: unknown) => {
      failure = error;
      abort.abort(error);
    };
    source.once('error', onError);
    try {
      await this.#client.send(
        new this.#s3.PutObjectCommand({ Bucket: this.#bucket, Key: this.#prefix + key, Body: body, ContentLength: length }),
        { abortSignal: abort.signal },
      );
    } catch (error) {
      throw failure ?? error;
    } finally {
      source.off('error', onError);
    }
    return { size: length };
  }

  async createReadStream(key: string, range?: ByteRange): Promise<Readable> {
    try {
      const answer = await this.#client.send(
        new this.#s3.GetObjectCommand({
          Bucket: this.#bucket,
          Key: this.#prefix + key,
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      return answer.Body as Readable;
    } catch (error) {
      if (isMissing(error)) throw missing(key);
      throw error;
    }
  }

  async stat(key: string): Promise<{ size: number } | undefined> {
    try {
      const head = await this.#client.send(new this.#s3.HeadObjectCommand({ Bucket: this.#bucket, Key: this.#prefix + key }));
      return { size: head.ContentLength ?? 0 };
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await this.#client.send(new this.#s3.DeleteObjectCommand({ Bucket: this.#bucket, Key: this.#prefix + key }));
    } catch (error) {
      if (!isMissing(error)) throw error;
    }
  }
}

/**
 * The bucket MEDIA_S3_* names. The SDK is loaded only here, so a process on another store never
 * pays its memory. Checksums are sent only where S3 requires them: S3-compatible servers do not
 * all accept the SDK's default trailing checksums.
 */
export async function openS3Storage(config: Config['mediaS3']): Promise<MediaStorage> {
  if (!config) throw new Error('MEDIA_STORE=s3 needs MEDIA_S3_BUCKET');
  const s3 = await import('@aws-sdk/client-s3');
  const client = new s3.S3Client({
    region: config.region,
    endpoint: config.endpoint,
    forcePathStyle: config.forcePathStyle,
    credentials: config.credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return new S3Storage(s3, client, config.bucket, config.prefix);
}
