import { validationError } from '../errors.ts';

/** True for PostgreSQL's unique_violation (23505), from pg and PGlite alike. */
export function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '23505';
}

/**
 * A write guarded by a unique index: two requests racing for one value both pass the checks
 * before it, the index decides, and the loser gets the same validation error naming `field`.
 */
export async function uniqueOn<T>(field: string, write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (error) {
    if (isUniqueViolation(error)) throw validationError({ [field]: ['is already taken'] });
    throw error;
  }
}
