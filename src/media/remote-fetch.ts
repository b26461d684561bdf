import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { BlockList, isIP } from 'node:net';
import { DomainError } from '../errors.ts';
import { mediaRejected } from './errors.ts';

export interface RemoteFetchOptions {
  timeoutMs: number;
  maxBytes: number;
  /** Allow loopback and private addresses (tests, or a deliberately internal deployment). */
  allowPrivate: boolean;
}

export interface RemoteFile {
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

// Addresses a URL from a client must not make Hopper reach: loopback, private networks, link-local
// (cloud metadata services live at 169.254.169.254), carrier-grade NAT, multicast, reserved and
// documentation ranges, and IPv6 forms that embed IPv4. IPv4-mapped IPv6 is matched by the IPv4 rules.
const PRIVATE = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 3],
] as const) {
  PRIVATE.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 127],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  PRIVATE.addSubnet(network, prefix, 'ipv6');
}

export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  return family === 0 || PRIVATE.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

class PrivateAddressError extends Error {
  override name = 'PrivateAddressError';
}

/**
 * Resolves like `dns.lookup` but refuses names that resolve to a private address. Checking here,
 * where the socket gets its address, means a name cannot pass a check and then re-resolve
 * elsewhere (DNS rebinding), and every redirect hop is checked the same way.
 */
function guardedLookup(hostname: string, options: LookupOptions, callback: (...args: unknown[]) => void): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
    if (error) return callback(error);
    const refused = addresses.find((a) => isPrivateAddress(a.address));
    if (refused) return callback(new PrivateAddressError(`${hostname} resolves to ${refused.address}`));
    if (options.all) return callback(null, addresses);
    callback(null, addresses[0]?.address, addresses[0]?.family);
  });
}

/** Opens `address` for reading: http(s) only, redirects followed and re-checked, one deadline for everything. */
export async function openRemoteFile(address: string, options: RemoteFetchOptions): Promise<RemoteFile> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  let url = httpUrl(address);
  for (let hop = 0; ; hop++) {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (!options.allowPrivate && isIP(host) && isPrivateAddress(host)) {
      throw unreachable('it points at a private or loopback address, which Hopper does not fetch from');
    }
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
  if (name === 'PrivateAddressError') return unreachable(`it points at a private or loopback address (${message})`);
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return unreachable('its host name does not resolve');
  if (code === 'ECONNREFUSED') return unreachable('the server refused the connection');
  if (code?.includes('CERT') || code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE')
    return unreachable("the server's TLS certificate is not trusted");
  return unreachable(`the transfer failed (${code ?? message})`);
}

function unreachable(reason: string): DomainError {
  return mediaRejected('unreachable', FIELD, `could not be fetched: ${reason}`);
}

function httpUrl(text: string): URL {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw mediaRejected('unreachable', FIELD, 'must be an absolute http:// or https:// URL');
  }
  return url;
}

function get(url: URL, signal: AbortSignal, allowPrivate: boolean): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : http;
    const request = client.get(
      url,
      {
        signal,
        lookup: allowPrivate ? undefined : (guardedLookup as unknown as typeof dnsLookup),
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
