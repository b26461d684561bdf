import { realTimeMs } from '../time.ts';

/**
 * How long an answer's Retry-After (RFC 9110 §10.2.3) asks the client to wait, in milliseconds from
 * `now`: delay-seconds or an HTTP-date (one already past is 0); null when absent or unreadable.
 * Whoever reads it caps it at what it is willing to wait.
 */
export function retryAfterMs(value: string | string[] | null | undefined, now = realTimeMs()): number | null {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return null;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}
