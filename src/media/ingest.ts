import { randomBytes, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { MediaRow } from '../db/schema.ts';
import { DomainError, validationError } from '../errors.ts';
import type { Clock } from '../time.ts';
import { audioDurationSeconds } from './audio-duration.ts';
import { AUDIO_COLLECTION, collectionRefusal, detectMediaType } from './detect.ts';
import { mediaRejected } from './errors.ts';
import { insertMedia, mediaFieldProblems } from './media.ts';
import { fetchFailure, openRemoteFile } from './remote-fetch.ts';
import { removeStaleFiles } from './storage.ts';
import type { MediaStorage } from './store.ts';

/**
 * Taking in a media file, by upload or by URL: the bytes are first written to a private staging
 * file (counted as they arrive, so an oversized file is refused without being held in memory),
 * then judged from the bytes, and only an accepted file is copied into the media store and
 * recorded. A refused or failed file leaves nothing behind.
 */
export interface MediaIntake {
  readonly db: Db;
  /** When a stored item is recorded as made. */
  readonly clock: Clock;
  readonly storage: MediaStorage;
  readonly stagingDir: string;
  readonly maxBytes: number;
}

export interface StagedFile {
  readonly path: string;
  readonly size: number;
}

interface MediaDetails {
  readonly userId: number;
  /** The client's name for the file (upload file name, or the URL's last segment), if any. */
  readonly originalName: string | undefined;
  readonly name: string | undefined;
  readonly collectionName: string;
  /** The request field a refusal names: `file` or `full_url`. */
  readonly field: string;
}

export async function prepareStaging(stagingDir: string): Promise<void> {
  await mkdir(stagingDir, { recursive: true });
  await removeStaleFiles(stagingDir);
}

/** Writes `source` to a staging file, refusing it (and removing the partial file) past `maxBytes`. */
export async function stage(intake: MediaIntake, source: Readable, field: string): Promise<StagedFile> {
  const path = join(intake.stagingDir, randomUUID());
  let size = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      size += chunk.length;
      if (size > intake.maxBytes) {
        callback(mediaRejected('too_large', field, `The file is larger than the limit of ${intake.maxBytes} bytes.`));
      } else {
        callback(null, chunk);
      }
    },
  });
  try {
    await pipeline(source, counter, createWriteStream(path, { flags: 'wx' }));
  } catch (error) {
    await rm(path, { force: true });
    throw error;
  }
  return { path, size };
}

export async function discard(staged: StagedFile | undefined): Promise<void> {
  if (staged) await rm(staged.path, { force: true });
}

/** Judges a staged file, stores it and records it; the staging file is gone afterwards either way. */
export async function store(intake: MediaIntake, staged: StagedFile, details: MediaDetails): Promise<MediaRow> {
  try {
    const type = await detectMediaType(staged.path);
    const refusal = collectionRefusal(details.collectionName, type);
    if (refusal || !type) {
      throw mediaRejected('unsupported_type', details.field, refusal ?? 'is not a supported file type');
    }
    const durationSeconds = type.kind === 'audio' ? await audioDurationSeconds(staged.path, type.ext) : null;
    // 192 random bits: the public URL is the only thing guarding the file, so it must not be guessable.
    const token = randomBytes(24).toString('base64url');
    const storageKey = `${details.userId}/${token}`;
    await intake.storage.put(storageKey, createReadStream(staged.path), staged.size);
    try {
      const now = intake.clock();
      return await insertMedia(intake.db, {
        created_at: now,
        updated_at: now,
        user_id: details.userId,
        name: details.name ?? baseName(details.originalName),
        file_name: `${safeFileStem(details.originalName)}.${type.ext}`,
        collection_name: details.collectionName,
        mime_type: type.mime,
        size: staged.size,
        duration_seconds: durationSeconds,
        token,
        storage_key: storageKey,
      });
    } catch (error) {
      await intake.storage.delete(storageKey);
      throw error;
    }
  } finally {
    await discard(staged);
  }
}

/** Fetches `full_url` into staging and stores it (http/https only, private addresses refused unless configured). */
export async function importFromUrl(
  intake: MediaIntake,
  userId: number,
  body: { full_url: string; name?: string; collection_name?: string },
  config: Pick<Config, 'mediaFetchTimeoutMs' | 'mediaFetchAllowPrivate'>,
): Promise<MediaRow> {
  const problems = mediaFieldProblems(body.name, body.collection_name);
  if (Object.keys(problems).length > 0) throw validationError(problems);
  const timeoutMs = config.mediaFetchTimeoutMs;
  const remote = await openRemoteFile(body.full_url, { timeoutMs, maxBytes: intake.maxBytes, allowPrivate: config.mediaFetchAllowPrivate });
  let staged: StagedFile;
  try {
    staged = await stage(intake, remote.stream, 'full_url');
  } catch (error) {
    // The remote side breaking off is the URL's problem (400); our own disk failing is ours (500).
    if (error instanceof DomainError || remote.stream.errored) throw fetchFailure(error, remote.deadline, timeoutMs);
    throw error;
  }
  return store(intake, staged, {
    userId,
    originalName: remote.fileName,
    name: body.name,
    collectionName: body.collection_name ?? AUDIO_COLLECTION,
    field: 'full_url',
  });
}

const FALLBACK_NAME = 'media';

/** "C:\\fakepath\\Open House.mp3" → "Open House": the name a person gave the file, extension dropped. */
function baseName(original: string | undefined): string {
  const last = (original ?? '').split(/[/\\]/).pop() ?? '';
  const stem = last
    .replace(/\.[A-Za-z0-9]{1,5}$/, '')
    .replace(/\p{Cc}/gu, '')
    .trim();
  return stem.slice(0, 255) || FALLBACK_NAME;
}

/**
 * "Open House (final).MP3" → "Open-House-final": only characters that need no escaping in a URL
 * path or a Content-Disposition header. The extension is then taken from the detected type.
 */
function safeFileStem(original: string | undefined): string {
  const stem = baseName(original)
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .slice(0, 100)
    .replace(/^[-._]+|[-._]+$/g, '');
  return stem || FALLBACK_NAME;
}
