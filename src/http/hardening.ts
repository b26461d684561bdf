import type { IncomingMessage } from 'node:http';
import proxyAddr from '@fastify/proxy-addr';
import { validationError } from '../errors.ts';
import type { App } from './fastify-types.ts';
import { HttpError, securityHeaders } from './problems.ts';

/**
 * The request line and headers may take HEADER_LIMIT bytes; Node's parser lets four times that
 * through so that the refusal (431) is made here, where the method is known — a HEAD gets no body —
 * rather than by the parser (clientErrorResponse, for what is larger still).
 */
const HEADER_LIMIT = 16 * 1024;
export const PARSER_HEADER_LIMIT = 4 * HEADER_LIMIT;
const SANE_REQUEST_ID = /^[\w.:-]{1,128}$/;
const ID = /^\d{1,16}$/;

/**
 * Which hops of X-Forwarded-For Fastify may believe (its `trustProxy`, read by proxy-addr from the
 * connection inwards): none without a proxy; with TRUST_PROXY=true the connecting peer alone, so
 * the client is the address it appended, the header's last; with a list, the listed proxies, so
 * the client is the rightmost address none of them is. Fastify's own `true` trusts every hop, and
 * the client would pick its address by writing the first (issue 36); a hop count fails closed in
 * Fastify 5, so the one hop is a function.
 */
export function proxyTrust(config: { trustProxy: boolean; trustedProxies: readonly string[] }) {
  if (!config.trustProxy) return false;
  if (config.trustedProxies.length === 0) return (_address: string, hop: number) => hop === 0;
  return proxyAddr.compile([...config.trustedProxies]);
}

/** The caller's `X-Request-Id` when it is sane, else a new one. */
export function requestId(req: IncomingMessage, fresh: () => string): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : fresh();
}

/**
 * What every request meets first: its id and the security headers on the answer; refusals of a
 * fragment in the URL, of oversized headers, of plain HTTP behind a TLS-terminating proxy; and
 * path ids that are digits only. The hooks are synchronous (Fastify's `done` style, a refusal
 * thrown): an async hook costs every request a promise and a turn of the microtask queue.
 */
export function registerHardening(app: App, options: { secure: boolean; trustProxy: boolean }): void {
  const always = securityHeaders(options.secure);
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('X-Request-Id', request.id);
    reply.headers(always);
    // A request target never carries a fragment; the router would drop `#…` and act on what is
    // left (`/v3/api_keys/1#x` on key 1).
    if (request.raw.url?.includes('#')) {
      throw new HttpError('bad_request', 'The URL must not contain "#": a fragment is never sent to a server (percent-encode it as %23).');
    }
    if (headerBytes(request.raw) > HEADER_LIMIT) {
      throw new HttpError('request_header_fields_too_large', `The request line and headers are larger than ${HEADER_LIMIT / 1024} KiB.`);
    }
    if (options.trustProxy && request.url !== '/health') {
      const proto = String(request.headers['x-forwarded-proto'] ?? '')
        .split(',')[0]
        ?.trim();
      if (proto !== 'https') {
        throw new HttpError('https_required', 'This API is served over HTTPS only; repeat the request with https://.');
      }
    }
    done();
  });

  // Path ids are digits only: the validator would read "1e3" or " 7" as numbers.
  app.addHook('preValidation', (request, _reply, done) => {
    const params = (request.params ?? {}) as Record<string, string>;
    let bad: string[] | undefined;
    for (const name in params) {
      if ((name === 'id' || name.endsWith('_id')) && !ID.test(params[name] ?? '')) {
        bad ??= [];
        bad.push(name);
      }
    }
    if (bad) {
      throw validationError(
        Object.fromEntries(
          bad.map((name) => [
            name,
            [/^\d+$/.test(params[name] ?? '') ? 'has more digits than any id (at most 16)' : 'must be an id: digits only, such as 42'],
          ]),
        ),
      );
    }
    done();
  });
}

function headerBytes(raw: { url?: string; method?: string; rawHeaders: string[] }): number {
  let n = (raw.method?.length ?? 0) + (raw.url?.length ?? 0) + 12;
  for (const part of raw.rawHeaders) n += part.length + 2;
  return n;
}
