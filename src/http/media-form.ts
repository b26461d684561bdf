import type { FastifyRequest } from 'fastify';
import type { MediaRow } from '../db/schema.ts';
import { DomainError, type FieldErrors, validationError } from '../errors.ts';
import { AUDIO_COLLECTION } from '../media/detect.ts';
import { mediaRejected } from '../media/errors.ts';
import { discard, type MediaIntake, type StagedFile, stage, store } from '../media/ingest.ts';
import { mediaFieldProblems, UPLOAD_FIELDS } from '../media/media.ts';
import { HttpError } from './problems.ts';

/** Room for boundaries, part headers and the short text fields around the file in a form. */
const FORM_OVERHEAD_BYTES = 64 * 1024;

/** The answer to a JSON body where a form is expected. */
export function requireMultipart(request: FastifyRequest): void {
  if (request.isMultipart()) return;
  throw new HttpError(
    'unsupported_media_type',
    'Send the file as multipart/form-data, in a part named file (to have Hopper fetch a URL, POST JSON with full_url to /media/import).',
  );
}

/** The answer to a form where a JSON body is expected. */
export function requireJson(request: FastifyRequest): void {
  if (!request.isMultipart()) return;
  throw new HttpError(
    'unsupported_media_type',
    'Send JSON with full_url (Content-Type: application/json); to upload a file as multipart/form-data, POST it to /media/upload.',
  );
}

/**
 * Reads a multipart/form-data upload part by part: the file streams to staging as it arrives,
 * and the text fields may come before or after it. Every field problem is reported at once. A
 * body that cannot fit is refused before any of it is read.
 */
export async function createFromUpload(request: FastifyRequest, intake: MediaIntake, userId: number): Promise<MediaRow> {
  if (Number(request.headers['content-length']) > intake.maxBytes + FORM_OVERHEAD_BYTES) {
    throw mediaRejected('too_large', 'file', `The file is larger than the limit of ${intake.maxBytes} bytes.`);
  }
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
      } else if (!UPLOAD_FIELDS.has(field)) {
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
  Object.assign(errors, mediaFieldProblems(fields.name, fields.collection_name));
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
