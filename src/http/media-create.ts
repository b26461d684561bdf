import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { MediaRow } from '../db/schema.ts';
import { DomainError, type FieldErrors, validationError } from '../errors.ts';
import { AUDIO_COLLECTION } from '../media/detect.ts';

import { discard, type MediaIntake, type StagedFile, stage, store } from '../media/ingest.ts';
import { fetchFailure, openRemoteFile } from '../media/remote-fetch.ts';
import { HttpError } from './problems.ts';

/** Room for boundaries, part headers and the short text fields around the file in a form. */
export const FORM_OVERHEAD_BYTES = 64 * 1024;

const FORM_FIELDS = new Set(['file', 'name', 'collection_name']);
const COLLECTION_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/**
 * Reads a multipart/form-data upload part by part: the file streams to staging as it arrives,
 * and the text fields may come before or after it. Every field problem is reported at once.
 */
export async function createFromUpload(request: FastifyRequest, intake: MediaIntake, userId: number): Promise<MediaRow> {
  // No prototypes: a form field may be called `__proto__` or `constructor`.
  const fields: Record<string, string> = Object.create(null);
  const errors: FieldErrors = Object.create(null);
  let staged: StagedFile | undefined;
  let originalName: string | undefined;
  try {
    for await (const part of request.parts()) {
      const field = part.fieldname;
      if (part.type === 'file') {
        if (field === 'file' && !staged) {
          originalName = part.filename;
          staged = await stage(intake, part.file, 'file');
        } else {
          errors[field] = [field === 'file' ? 'must be a single file' : 'is not a known field'];
          part.file.resume();
        }
      } else if (!FORM_FIELDS.has(field)) {
        errors[field] = ['is not a known field'];
      } else if (field === 'file') {
        errors.file = ['must be a file upload, not a text field'];
      } else if (fields[field] !== undefined) {
        errors[field] = ['must be given once'];
      } else if (typeof part.value !== 'string') {
        errors[field] = ['must be a string'];
      } else if (part.valueTruncated) {
        errors[field] = ['is far too long'];
      } else {
        fields[field] = part.value;
      }
    }
  } catch (error) {
    await discard(staged);
    throw formError(error);
  }
  if (!staged && !errors.file) errors.file = ['is required'];
  Object.assign(errors, detailProblems(fields.name, fields.collection_name));
  if (!staged || Object.keys(errors).length > 0) {
    await discard(staged);
    throw validationError(errors);
  }
  return store(intake, staged, {
    userId,
    originalName,
    name: fields.name,
    collectionName: fields.collection_name ?? AUDIO_COLLECTION,
    field: 'file',
  });
}

/** Fetches `full_url` into staging (http/https only, private addresses refused unless configured). */
export async function createFromUrl(
  body: { full_url: string; name?: string; collection_name?: string },
  intake: MediaIntake,
  userId: number,
  config: Config,
): Promise<MediaRow> {
  const problems = detailProblems(body.name, body.collection_name);
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

/** The rules on `name` and `collection_name` that JSON schema does not cover (and forms need in full). */
function detailProblems(name: string | undefined, collection: string | undefined): FieldErrors {
  const errors: FieldErrors = {};
  if (name !== undefined) {
    const length = [...name].length;
    if (length === 0) errors.name = ['must not be empty'];
    else if (length > 255) errors.name = ['must be at most 255 characters'];
    else if (name.includes('\u0000')) errors.name = ['must not contain NUL characters'];
  }
  if (collection !== undefined && !COLLECTION_NAME.test(collection)) {
    errors.collection_name = ['must be 1 to 64 lower-case letters, digits, "-" or "_", starting with a letter or digit'];
  }
  return errors;
}

/** Parser trouble is the client's (400); a failing disk is ours and stays a 500. */
function formError(error: unknown): unknown {
  if (error instanceof DomainError || error instanceof HttpError) return error;
  const { code, syscall, message } = error as NodeJS.ErrnoException;
  if (syscall) return error;
  if (code === 'FST_FILES_LIMIT') return validationError({ file: ['must be a single file'] });
  if (code === 'FST_PARTS_LIMIT' || code === 'FST_FIELDS_LIMIT') {
    return new HttpError('bad_request', 'The form has too many fields: send file, and optionally name and collection_name.');
  }
  return new HttpError('bad_request', `The multipart/form-data body could not be read: ${message}`);
}
