import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { sql } from 'kysely';
import type { App } from '../../src/http/fastify-types.ts';
import { asKey, type Reply } from '../support/client.ts';
import type { TestApp } from '../support/test-app.ts';

/** A real 16-bit mono PCM WAV: a 440 Hz tone of `seconds` at `rate` samples a second. */
export function wavFile(seconds: number, rate = 8000): Buffer {
  const samples = Math.round(seconds * rate);
  const data = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) data.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)), i * 2);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16); // fmt chunk length
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28); // byte rate
  header.writeUInt16LE(2, 32); // block align
  header.writeUInt16LE(16, 34); // bits per sample
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

/**
 * Constant-bitrate MP3: MPEG-1 Layer III frames at 128 kbit/s, 44.1 kHz (header FFFB9064), each
 * 417 bytes and 1152 samples long; silent, which is still a valid stream.
 */
export function mp3File(seconds: number): Buffer {
  const frames = Math.ceil((seconds * 44100) / 1152);
  const frame = Buffer.alloc(417);
  frame.writeUInt32BE(0xfffb9064, 0);
  return Buffer.concat(Array.from({ length: frames }, () => frame));
}

/** A one-pixel PNG. */
export const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201e7a3a6a10000000049454e44ae426082',
  'hex',
);

export type FormPart = { name: string; value: string } | { name: string; filename: string; content: Buffer; type?: string };

/** A multipart/form-data body and its Content-Type, built by hand as a browser or curl -F would. */
export function multipartBody(parts: FormPart[]): { body: Buffer; contentType: string } {
  const boundary = `----hopper${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition =
      'filename' in part
        ? `form-data; name="${part.name}"; filename="${part.filename}"\r\nContent-Type: ${part.type ?? 'application/octet-stream'}`
        : `form-data; name="${part.name}"`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n\r\n`));
    chunks.push('filename' in part ? part.content : Buffer.from(part.value));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** POSTs a form to `url` with `key`, parsed like every other test reply. */
export async function postForm(app: App, key: string | undefined, url: string, parts: FormPart[]): Promise<Reply> {
  const { body, contentType } = multipartBody(parts);
  const response = await app.inject({
    method: 'POST',
    url,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), 'content-type': contentType },
    payload: body,
  });
  const type = String(response.headers['content-type'] ?? '');
  return {
    status: response.statusCode,
    headers: response.headers,
    body: type.includes('json') && response.body ? JSON.parse(response.body) : response.body,
    raw: response.body,
  };
}

/** Uploads `content` as the `file` field and expects a 201. */
export async function upload(app: App, key: string, userId: number, filename: string, content: Buffer, extra: FormPart[] = []) {
  const reply = await postForm(app, key, `/v3/users/${userId}/media`, [...extra, { name: 'file', filename, content }]);
  if (reply.status !== 201) throw new Error(`upload failed: ${reply.status} ${reply.raw}`);
  return reply.body;
}

/** Fetches a URL through the app (public or keyed) and returns the raw bytes. */
export async function fetchBytes(app: App, url: string, headers: Record<string, string> = {}, key?: string) {
  const path = new URL(url).pathname;
  const response = await app.inject({
    method: 'GET',
    url: path,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
  });
  return { status: response.statusCode, headers: response.headers, bytes: response.rawPayload };
}

/** Every regular file under `dir`, recursively (for "nothing was left on disk"). */
export async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

/** The keys the test app's media store holds, whichever store it is (for "nothing was stored"). */
export async function storedFiles(t: TestApp): Promise<string[]> {
  if (t.config.mediaStore === 'disk') return filesUnder(t.config.mediaDir);
  if (t.config.mediaStore === 'postgres') {
    const { rows } = await sql<{ storage_key: string }>`SELECT DISTINCT storage_key FROM media_blobs ORDER BY 1`.execute(t.database.db);
    return rows.map((r) => r.storage_key);
  }
  throw new Error(`storedFiles: no listing for MEDIA_STORE=${t.config.mediaStore}`);
}

export { asKey };
