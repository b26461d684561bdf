import { readFileSync } from 'node:fs';
import { createSecureContext, rootCertificates } from 'node:tls';
import type { WebhookConfig } from '../config.ts';
import { connectionLookup, RefusedAddress, urlProblem } from '../net/address-guard.ts';
import { retryAfterMs } from '../net/retry-after.ts';

type Undici = typeof import('undici');

/**
 * Posts one signed event to an endpoint and says how it went. The address is checked where the
 * socket gets it: a name resolving to a loopback, private or link-local address is refused (unless
 * WEBHOOK_ALLOW_PRIVATE), and the connection goes to the address that was checked, so a name cannot
 * pass the check and then resolve elsewhere (DNS rebinding). Redirects are answers like any other
 * non-2xx: never followed (undici's `request` follows none).
 *
 * One undici Agent keeps a pool of keep-alive connections per origin, at most WEBHOOK_MAX_IN_FLIGHT
 * of them: a name is resolved (and checked) when a connection opens, not on every post. Node's own
 * https.Agent was the bottleneck here: it derives its pool key from the TLS options on every
 * request, certificate authorities included (a few hundred kilobytes with WEBHOOK_CA_FILE), which
 * cost more than the post itself.
 *
 * undici is loaded with the first post, not at start: it holds about 4 MB that a process whose
 * users have no webhook endpoints never needs (docs/performance.md, "What an idle process holds").
 */
interface PostResult {
  /** The HTTP status, when the endpoint answered. */
  status: number | null;
  /** Why it failed, when it did (non-2xx, timeout, refused address, connection error). */
  error: string | null;
  ok: boolean;
  durationMs: number;
  /** What a 429 or 503 answer's Retry-After asked for, in milliseconds (seconds or an HTTP date); null without one. */
  retryAfterMs: number | null;
}

export interface WebhookSender {
  post(url: string, headers: Record<string, string>, body: string): Promise<PostResult>;
  close(): Promise<void>;
}

const MAX_ERROR_BODY = 200;

export function createWebhookSender(config: WebhookConfig): WebhookSender {
  const lookup = connectionLookup(config.allowPrivate);
  // One TLS context for every connection: made per connection, the trusted roots are parsed each time.
  const secureContext = createSecureContext(config.caFile ? { ca: [...rootCertificates, readFileSync(config.caFile, 'utf8')] } : {});
  let loading: Promise<{ undici: Undici; agent: InstanceType<Undici['Agent']> }> | undefined;
  const load = async () => {
    const undici = await import('undici');
    const agent = new undici.Agent({
      connections: config.maxInFlight,
      allowH2: false,
      keepAliveTimeout: 30_000,
      headersTimeout: config.timeoutMs,
      bodyTimeout: config.timeoutMs,
      connect: { timeout: config.timeoutMs, secureContext, ...(lookup ? { lookup } : {}) },
    });
    return { undici, agent };
  };

  return {
    async post(target, headers, body) {
      const started = performance.now();
      const done = (status: number | null, error: string | null, retryAfter: number | null = null): PostResult => ({
        status,
        error,
        ok: error === null,
        durationMs: Math.round(performance.now() - started),
        retryAfterMs: retryAfter,
      });
      if (!URL.canParse(target)) return done(null, 'the endpoint URL is not valid');
      const url = new URL(target);
      const problem = urlProblem(url, config);
      if (problem) return done(null, `refused: the endpoint URL ${problem}`);
      loading ??= load();
      const { undici, agent } = await loading;
      const { errors } = undici;
      // One deadline for the whole exchange: connecting, the answer's headers and its body.
      const deadline = AbortSignal.timeout(config.timeoutMs);
      try {
        const response = await undici.request(url, {
          method: 'POST',
          dispatcher: agent,
          signal: deadline,
          headers: { ...headers, 'content-type': 'application/json', 'user-agent': 'Hopper-Webhooks/1' },
          body,
        });
        const status = response.statusCode;
        if (status >= 200 && status < 300) {
          await response.body.dump();
          return done(status, null);
        }
        const excerpt = (await response.body.text().catch(() => '')).slice(0, MAX_ERROR_BODY).trim().replace(/\s+/g, ' ');
        const retryAfter = status === 429 || status === 503 ? retryAfterMs(response.headers['retry-after']) : null;
        return done(status, `HTTP ${status}${excerpt ? `: ${excerpt}` : ''}`, retryAfter);
      } catch (error) {
        if (deadline.aborted || error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) {
          return done(null, `timed out after ${config.timeoutMs} ms`);
        }
        return done(null, describe(error as Error, errors));
      }
    },
    async close() {
      if (loading) await (await loading).agent.destroy();
    },
  };
}

function describe(error: Error & { code?: string; cause?: unknown }, errors: Undici['errors']): string {
  const cause = error.cause instanceof Error ? (error.cause as Error & { code?: string }) : undefined;
  const root = error instanceof RefusedAddress ? error : cause instanceof RefusedAddress ? cause : undefined;
  if (root) return `refused: ${root.message}`;
  if (error instanceof errors.ConnectTimeoutError) return `connection timed out: ${error.message}`;
  const shown = cause && !error.code ? cause : error;
  return shown.code ? `${shown.code}: ${shown.message}` : shown.message;
}
