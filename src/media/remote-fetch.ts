import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { DomainError } from '../errors.ts';
import { connectionLookup, urlProblem } from '../net/address-guard.ts';
import { mediaRejected } from './errors.ts';

interface RemoteFetchOptions {
  timeoutMs: number;
  maxBytes: number;
  /** Allow loopback and private addresses (tests, or a deliberately internal deployment). */
  allowPrivate: boolean;
}

interface RemoteFile {
  /** The response body; it errors if the deadline passes while it is still arriving. */
  stream: IncomingMessage;
  /** Aborts when the deadline passes; tells a timeout from other transfer errors. */
  deadline: AbortSignal;
  /** The last path segment of the final URL, as a hint for the stored file's name. */
  fileName: string | undefined;
}

const FIELD = 'full_url';
const MAX_REDIRECTS = 5;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Opens `address` for reading: http(s) only, redirects followed and re-checked, one deadline for everything. */
export async function openRemoteFile(address: string, options: RemoteFetchOptions): Promise<RemoteFile> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  let url = checkedUrl(address, options.allowPrivate);
  for (let hop = 0; ; hop++) {
    let response: IncomingMessage;
    try {
      response = await get(url, deadline, options.allowPrivate);
    } catch (error) {
      throw fetchFailure(error, deadline, options.timeoutMs);
    }
    const status = response.statusCode ?? 0;
    const location = response.headers.location;
    if (REDIRECTS.has(status) && location) {
      response.resume();
      if (hop === MAX_REDIRECTS) throw unreachable(`it redirected more than ${MAX_REDIRECTS} times`);
      const target = URL.canParse(location, url.href) ? new URL(location, url) : undefined;
      if (target?.protocol !== 'http:' && target?.protocol !== 'https:') throw unreachable('it redirected to a URL that is not http(s)');
      const problem = urlProblem(target, { allowHttp: true, allowPrivate: options.allowPrivate });
      if (problem) throw unreachable(`it redirected to ${target.host}, which is refused: the URL ${problem}`);
      url = target;
      continue;
    }
    if (status !== 200) {
      response.resume();
      throw unreachable(`the server answered HTTP ${status}`);
    }
    if (Number(response.headers['content-length']) > options.maxBytes) {
      response.destroy();
      throw mediaRejected('too_large', FIELD, `The file at full_url is larger than the limit of ${options.maxBytes} bytes.`);
    }
    return { stream: response, deadline, fileName: lastSegment(url) };
  }
}

/** Describes a failed fetch (connecting, or the body breaking off) as a 400 on `full_url`. */
export function fetchFailure(error: unknown, deadline: AbortSignal, timeoutMs: number): DomainError {
  if (error instanceof DomainError) return error;
  // An abort surfaces as AbortError while connecting but as ECONNRESET mid-body: ask the signal.
  if (deadline.aborted) return unreachable(`it did not arrive within ${timeoutMs / 1000} s`);
  const { name, code, message } = error as NodeJS.ErrnoException;
  if (name === 'RefusedAddress') return unreachable(`it points at a private or loopback address (${message})`);
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return unreachable('its host name does not resolve');
  if (code === 'ECONNREFUSED') return unreachable('the server refused the connection');
  if (code?.includes('CERT') || code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE')
    return unreachable("the server's TLS certificate is not trusted");
  return unreachable(`the transfer failed (${code ?? message})`);
}

function unreachable(reason: string): DomainError {
  return mediaRejected('unreachable', FIELD, `could not be fetched: ${reason}`);
}

/** The URL a client gave, held to the rules every outbound connection follows (net/address-guard.ts). */
function checkedUrl(text: string, allowPrivate: boolean): URL {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (!url) throw mediaRejected('unreachable', FIELD, 'must be an absolute http:// or https:// URL');
  const problem = urlProblem(url, { allowHttp: true, allowPrivate });
  if (problem) throw mediaRejected('unreachable', FIELD, problem);
  return url;
}

function get(url: URL, signal: AbortSignal, allowPrivate: boolean): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : http;
    const request = client.get(
      url,
      {
        signal,
        lookup: connectionLookup(allowPrivate),
        headers: { 'user-agent': 'Hopper media fetcher', accept: 'audio/*, image/*;q=0.8, */*;q=0.5' },
      },
      resolve,
    );
    request.on('error', reject);
  });
}

function lastSegment(url: URL): string | undefined {
  const segment = url.pathname.split('/').pop();
  if (!segment) return undefined;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
