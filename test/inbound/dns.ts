import type { DNSResolver } from '../../src/inbound/authentication.ts';

/**
 * A DNS zone in memory for the inbound receiver's SPF, DKIM and DMARC checks, so that they run
 * offline and each test publishes the records it needs. It answers as `dns.promises.resolve`
 * does (mailauth's resolver contract): TXT records as arrays of strings, ENOTFOUND for a name it
 * does not hold, ENODATA for a type the name lacks.
 */
export type Zone = Record<string, { TXT?: string[]; A?: string[]; AAAA?: string[]; MX?: { exchange: string; priority: number }[] }>;

export function zoneResolver(zone: Zone): DNSResolver & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (name: string, rrtype: string) => {
    asked.push(`${rrtype} ${name}`);
    const records = zone[name.toLowerCase().replace(/\.$/, '')];
    if (!records) throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    const answer = records[rrtype as keyof typeof records];
    if (!answer) throw Object.assign(new Error(`query ENODATA ${name}`), { code: 'ENODATA' });
    // A TXT record longer than 255 bytes comes as several strings, as a real server splits it.
    if (rrtype === 'TXT') return (answer as string[]).map((text) => text.match(/.{1,255}/g) ?? ['']);
    return answer as never;
  };
  return Object.assign(resolve as DNSResolver, { asked });
}
