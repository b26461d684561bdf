import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// @ts-expect-error s3rver ships no type declarations
import S3rver from 's3rver';

/**
 * An S3-compatible server of the test's own (s3rver: S3's REST API over a directory, signatures
 * checked with its fixed key pair), with one bucket, and the environment that points Hopper at it.
 */
export interface LocalS3 {
  readonly endpoint: string;
  readonly bucket: string;
  /** MEDIA_STORE=s3 and its settings, with the server's credentials. */
  readonly env: Record<string, string>;
  close(): Promise<void>;
}

export async function startLocalS3(bucket = 'hopper-media'): Promise<LocalS3> {
  const directory = await mkdtemp(join(tmpdir(), 'hopper-s3-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', directory, silent: true, configureBuckets: [{ name: bucket }] });
  const { port } = (await server.run()) as { port: number };
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    env: {
      MEDIA_STORE: 's3',
      MEDIA_S3_BUCKET: bucket,
      MEDIA_S3_ENDPOINT: endpoint,
      MEDIA_S3_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
    },
    async close() {
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
