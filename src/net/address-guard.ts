import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * The guard on every connection Hopper opens to a URL a user gave it (media `full_url`, webhook
 * endpoints): no credentials in the URL, and no loopback, private, link-local or otherwise
 * internal address — checked on the URL's literal host when it is read, and again where the
 * socket gets its address (`guardedLookup`), so a name cannot pass a check and then resolve
 * elsewhere (DNS rebinding), and every redirect hop is checked the same way.
 */

// Loopback, private networks, link-local (cloud metadata services live at 169.254.169.254),
// carrier-grade NAT, multicast, reserved and documentation ranges, and IPv6 forms that embed IPv4:
// IPv4-compatible (`::/96`, deprecated but still routed to the IPv4 address by some stacks:
// `::7f00:1` is 127.0.0.1; it covers `::` and `::1` too), IPv4-translated (`::ffff:0:0:0/96`),
// NAT64 (`64:ff9b::/96` and the local-use `64:ff9b:1::/48`) and 6to4. IPv4-mapped IPv6
// (`::ffff:0:0/96`) is matched by the IPv4 rules.
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
  ['::', 96],
  ['::ffff:0:0:0', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  PRIVATE.addSubnet(network, prefix, 'ipv6');
}

/** True for an internal address, and for anything that is not an IP address at all. */
function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  return family === 0 || PRIVATE.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** A name resolved to an internal address: `message` says which. */
export class RefusedAddress extends Error {
  override name = 'RefusedAddress';
  code = 'HOPPER_REFUSED_ADDRESS';
}

export interface UrlRules {
  /** `http://` as well as `https://`. */
  allowHttp: boolean;
  /** Internal addresses too (tests, or a deliberately internal deployment). */
  allowPrivate: boolean;
}

/** What is wrong with `url` as a place to connect to (a sentence fragment), or undefined. */
export function urlProblem(url: URL, rules: UrlRules): string | undefined {
  if (url.protocol !== 'https:' && !(rules.allowHttp && url.protocol === 'http:')) {
    return rules.allowHttp ? 'must be an http:// or https:// URL' : 'must be an https:// URL';
  }
  if (url.username || url.password) return 'must not contain a user name or password';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!rules.allowPrivate && (host === 'localhost' || host.endsWith('.localhost') || (isIP(host) !== 0 && isPrivateAddress(host)))) {
    return 'must not point at a private or loopback address (link-local and other internal ranges included)';
  }
  return undefined;
}

/** `dns.lookup` that refuses a name resolving to any internal address, and connects to the checked one. */
function guardedLookup(hostname: string, options: LookupOptions, callback: (...args: unknown[]) => void): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
    if (error) return callback(error);
    const refused = addresses.find((a) => isPrivateAddress(a.address));
    if (refused)
      return callback(new RefusedAddress(`${hostname} resolves to ${refused.address}, a private, loopback or link-local address`));
    if (options.all) return callback(null, addresses);
    callback(null, addresses[0]?.address, addresses[0]?.family);
  });
}

/** The lookup to give a socket: guarded, unless internal addresses are allowed. */
export function connectionLookup(allowPrivate: boolean): LookupFunction | undefined {
  return allowPrivate ? undefined : (guardedLookup as unknown as LookupFunction);
}
