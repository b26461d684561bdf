import { Resolver } from 'node:dns/promises';
import { domainToASCII } from 'node:url';
import { authenticate, type DNSResolver } from 'mailauth';
import type { ReplyAuthentication } from '../db/schema.ts';

/**
 * Who a reply really comes from: SPF (the connecting address against the envelope sender's
 * domain), DKIM (the message's signatures) and DMARC (either aligned with the From domain, and
 * the domain's policy), checked by mailauth as the message arrives. The DNS is the system's,
 * the servers of DNS_SERVERS, or (tests) a resolver given to the receiver, so that the
 * checks run without the network.
 *
 * What Hopper does with the verdict (inbound-messages.ts): a reply whose DMARC fails is held —
 * stored, listed with its verdict, never forwarded to the agent (docs/inbound.md); every forward
 * carries the verdict in an Authentication-Results header of Hopper's own. A bounce or complaint
 * that does not come from the null sender at a bounce address counts only when it comes,
 * authenticated, from a known feedback loop (`feedbackLoopOf`, receiver.ts).
 */
export type { DNSResolver };

/** The connection facts SPF needs: the client's address, its EHLO name, the envelope sender. */
export interface Arrival {
  ip: string;
  helo: string;
  sender: string;
}

/** The resolver of DNS_SERVERS (`host` or `host:port`), or the system's when there are none. */
export function dnsResolver(servers: readonly string[]): DNSResolver | undefined {
  if (servers.length === 0) return undefined;
  const resolver = new Resolver({ timeout: 3000, tries: 2 });
  resolver.setServers([...servers]);
  return (name, rrtype) => resolver.resolve(name, rrtype) as Promise<string[][] | string[]>;
}

/** What the checks said of one message: the verdict a reply keeps, and the domains that passed. */
interface Verdict {
  /** Kept with a reply (replies.authentication) and shown to the agent. */
  stored: ReplyAuthentication;
  /** The envelope sender's domain when SPF passed, and the domain (d=) of each DKIM signature that did. */
  passed: readonly string[];
}

/** The verdict on one message as received; `authservId` names Hopper's receiver in the results. */
export async function authenticateArrival(
  raw: Buffer,
  arrival: Arrival,
  authservId: string,
  resolver: DNSResolver | undefined,
): Promise<Verdict> {
  let result: Awaited<ReturnType<typeof authenticate>>;
  try {
    result = await authenticate(raw, {
      ip: arrival.ip,
      helo: arrival.helo,
      sender: arrival.sender,
      mta: authservId,
      ...(resolver ? { resolver } : {}),
      disableArc: true,
      disableBimi: true,
    });
  } catch {
    // A message mailauth cannot read at all: nothing is confirmed, and nothing failed either.
    return {
      stored: { spf: 'temperror', dkim: 'temperror', dmarc: 'temperror', from_domain: null, results: `${authservId}; none` },
      passed: [],
    };
  }
  const dkim = result.dkim.results ?? [];
  const dmarc = result.dmarc;
  const passed = dkim.filter((r) => r.status?.result === 'pass' && r.signingDomain).map((r) => (r.signingDomain as string).toLowerCase());
  if (result.spf && result.spf.status.result === 'pass' && result.spf.domain) passed.push(result.spf.domain.toLowerCase());
  return {
    stored: {
      spf: result.spf ? result.spf.status.result : 'none',
      // The best of the signatures: one that passes is enough for DKIM (DMARC judges alignment).
      dkim: dkim.some((r) => r.status?.result === 'pass') ? 'pass' : (dkim[0]?.status?.result ?? 'none'),
      // A From without one author domain cannot be judged (RFC 9989 5.3.1): treated as a failure.
      dmarc: dmarc ? dmarc.status.result : result.dmarcSkipReason ? 'fail' : 'none',
      from_domain: dmarc ? (dmarc.status.header?.from ?? null) : null,
      results: authenticationResults(result.headers),
    },
    passed,
  };
}

/**
 * The feedback loop (INBOUND_FEEDBACK_LOOPS) a report comes from, authenticated, or undefined. Its
 * From must be one address, the loop's own (`staff@hotmail.com`) or at the loop's domain (an
 * address of `amazonses.com` or a subdomain); and that must be confirmed: DMARC passed for the
 * From domain, or SPF (the envelope sender's domain) or a DKIM signature passed for a domain of
 * the loop. A From anyone could write, or a loop's address sent from elsewhere, is no report of
 * the loop's.
 */
export function feedbackLoopOf(from: readonly string[], verdict: Verdict, loops: readonly string[]): string | undefined {
  if (from.length !== 1) return undefined;
  const address = (from[0] as string).toLowerCase();
  const fromDomain = address.slice(address.lastIndexOf('@') + 1);
  const within = (domain: string, of: string) => domain === of || domain.endsWith(`.${of}`);
  return loops.find((loop) => {
    const domain = loop.slice(loop.lastIndexOf('@') + 1);
    if (loop.includes('@') ? address !== loop : !within(fromDomain, domain)) return false;
    return verdict.stored.dmarc === 'pass' || verdict.passed.some((passed) => within(passed, domain));
  });
}

/**
 * The value of the Authentication-Results header among mailauth's headers, unfolded, its
 * internationalized domains as A-labels: the forward of a reply from maria@müller.example then
 * needs no SMTPUTF8 for this header (only a UTF-8 local part, as josé@…, still does).
 */
function authenticationResults(headers: string): string {
  const unfolded = headers.replace(/\r?\n[ \t]+/g, ' ');
  const value = (/^Authentication-Results:\s*(.*)$/im.exec(unfolded)?.[1] ?? '').trim();
  return value.replace(/[^\s;=()"]*[^ -~\s][^\s;=()"]*/g, (token) => {
    const at = token.lastIndexOf('@');
    const domain = token.slice(at + 1);
    return `${at < 0 ? '' : `${token.slice(0, at)}@`}${domainToASCII(domain) || domain}`;
  });
}
