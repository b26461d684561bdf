import { createPrivateKey, createPublicKey } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { type Static, Type } from 'typebox';
import type { Config, DkimConfig, SmtpRelay } from '../config.ts';
import { Nullable, StringEnum, Timestamp } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';

/**
 * Whether a sender domain is set up as docs/email-setup.md says, read from the DNS: one SPF
 * record, the DKIM record of DKIM_SELECTOR holding the public half of DKIM_PRIVATE_KEY_FILE, a
 * DMARC policy, the inbound domain's MX at this Hopper, and SPF for the envelope sender
 * (Return-Path). Gmail and Yahoo refuse or junk bulk mail that fails these (February 2024), for
 * the whole domain; a DKIM record holding another key makes every signature fail unseen. Each
 * record is `ok`, `missing` or `wrong`, with the exact value to publish where Hopper knows it.
 */
const RECORD_TYPES = ['spf', 'dkim', 'dmarc', 'mx', 'return_path'] as const;
const RECORD_STATUSES = ['ok', 'missing', 'wrong'] as const;

const DomainRecordCheck = Type.Object(
  {
    type: StringEnum(RECORD_TYPES),
    status: StringEnum(RECORD_STATUSES),
    name: Type.String({ description: 'The DNS name the record lives at' }),
    found: Type.Array(Type.String(), { description: 'The records found there (TXT strings joined; MX as "preference host")' }),
    expected: Nullable(
      Type.String({ description: 'The value to publish (for DKIM, the exact TXT value); null where it is the operator’s choice' }),
    ),
    detail: Type.String({ description: 'What is right or wrong, in words' }),
  },
  { title: 'DomainRecordCheck' },
);
export const DomainCheck = Type.Object(
  { domain: Type.String(), checked_at: Timestamp, records: Type.Array(DomainRecordCheck) },
  { title: 'DomainCheck' },
);
export type DomainCheck = Static<typeof DomainCheck>;
type RecordCheck = Static<typeof DomainRecordCheck>;

/** How the check asks the DNS: TXT strings of a name (each record's chunks) and its MX records. */
interface DomainDns {
  txt(name: string): Promise<string[][]>;
  mx(name: string): Promise<{ exchange: string; priority: number }[]>;
  /** Ends the lookups in flight (they fail). */
  cancel(): void;
}

/** The DNS of DNS_SERVERS, or the system's: a name without records answers empty, any other failure throws. */
export function domainDns(servers: readonly string[]): DomainDns {
  const resolver = new Resolver({ timeout: 3000, tries: 2 });
  if (servers.length > 0) resolver.setServers([...servers]);
  const empty = <T>(error: NodeJS.ErrnoException): T[] => {
    if (error.code === 'ENODATA' || error.code === 'ENOTFOUND') return [];
    throw error;
  };
  return {
    txt: (name) => resolver.resolveTxt(name).catch(empty<string[]>),
    mx: (name) => resolver.resolveMx(name).catch(empty<{ exchange: string; priority: number }>),
    cancel: () => resolver.cancel(),
  };
}

/** The SPF include each relay documents; other relays: the operator's to fill in. */
const RELAY_SPF: Record<SmtpRelay, string | null> = {
  sendgrid: 'include:sendgrid.net',
  postmark: 'include:spf.mtasv.net',
  ses: 'include:amazonses.com',
  other: null,
};

type CheckConfig = Pick<Config, 'dkim' | 'inbound' | 'publicUrl' | 'smtpRelay'>;

/** Checks every record of `domain`; a lookup that fails (timeout, SERVFAIL) marks its record `missing`, saying so. */
export async function checkDomain(config: CheckConfig, dns: DomainDns, domain: string, now: Date): Promise<DomainCheck> {
  const name = domain.toLowerCase().replace(/\.$/, '');
  const checks: [RecordCheck['type'], () => Promise<RecordCheck>][] = [
    ['spf', () => checkSpf(config, dns, name, 'spf')],
    ['dkim', () => checkDkim(config.dkim, dns, name)],
    ['dmarc', () => checkDmarc(dns, name)],
  ];
  const inbound = config.inbound;
  if (inbound) checks.push(['mx', () => checkMx(dns, inbound.domain, new URL(config.publicUrl).hostname)]);
  checks.push(['return_path', () => checkSpf(config, dns, returnPathDomain(config, name), 'return_path')]);
  const records = await Promise.all(checks.map(([type, check]) => check().catch((error) => unanswered(type, error))));
  return { domain: name, checked_at: formatTimestamp(now), records };
}

function unanswered(type: RecordCheck['type'], error: Error & { hostname?: string; code?: string }): RecordCheck {
  return {
    type,
    status: 'missing',
    name: error.hostname ?? '',
    found: [],
    expected: null,
    detail: `The DNS did not answer (${error.code ?? error.message}); try again.`,
  };
}

/** Where bounces go: the inbound domain's VERP address when the receiver is on, else the From address itself. */
function returnPathDomain(config: CheckConfig, domain: string): string {
  return config.inbound?.domain ?? domain;
}

const joined = (records: string[][]) => records.map((chunks) => chunks.join(''));

async function checkSpf(config: CheckConfig, dns: DomainDns, name: string, type: 'spf' | 'return_path'): Promise<RecordCheck> {
  const found = joined(await dns.txt(name)).filter((text) => /^v=spf1(\s|$)/i.test(text));
  const include = RELAY_SPF[config.smtpRelay];
  const expected = include ? `v=spf1 ${include} -all` : null;
  const what = type === 'spf' ? 'SPF record' : `SPF record at the envelope sender's (Return-Path) domain ${name}`;
  const base = { type, name, found, expected };
  if (found.length === 0) return { ...base, status: 'missing', detail: `No ${what} (v=spf1): receivers cannot tell the relay may send.` };
  if (found.length > 1) {
    return {
      ...base,
      status: 'wrong',
      detail: `${found.length} SPF records: receivers answer permerror (RFC 7208 4.5); merge them into one.`,
    };
  }
  if (include && !found[0]?.toLowerCase().includes(include)) {
    return { ...base, status: 'wrong', detail: `The SPF record does not name the relay (${include}).` };
  }
  return {
    ...base,
    status: 'ok',
    detail: type === 'spf' ? 'One SPF record.' : `One SPF record at the envelope sender's (Return-Path) domain.`,
  };
}

/** The TXT value of a DKIM key record for the configured private key (RFC 6376 3.6.1; Ed25519: RFC 8463, the raw 32 bytes). */
function dkimRecordValue(dkim: DkimConfig): string {
  const publicKey = createPublicKey(createPrivateKey(dkim.privateKey));
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  if (publicKey.asymmetricKeyType === 'ed25519') return `v=DKIM1; k=ed25519; p=${spki.subarray(spki.length - 32).toString('base64')}`;
  return `v=DKIM1; k=rsa; p=${spki.toString('base64')}`;
}

/** A DKIM record's tags (`k`, `p`, …), whitespace inside values removed as RFC 6376 3.2 allows. */
function dkimTags(text: string): Map<string, string> {
  const tags = new Map<string, string>();
  for (const part of text.split(';')) {
    const at = part.indexOf('=');
    if (at > 0) tags.set(part.slice(0, at).trim().toLowerCase(), part.slice(at + 1).replace(/\s+/g, ''));
  }
  return tags;
}

async function checkDkim(dkim: DkimConfig | undefined, dns: DomainDns, domain: string): Promise<RecordCheck> {
  if (!dkim || !(domain === dkim.domain || domain.endsWith(`.${dkim.domain}`))) {
    const signing = dkim ? `DKIM_DOMAIN is ${dkim.domain}` : 'DKIM_DOMAIN is not set';
    return {
      type: 'dkim',
      status: 'missing',
      name: dkim ? `${dkim.selector}._domainkey.${domain}` : domain,
      found: [],
      expected: null,
      detail: `Hopper does not sign mail from ${domain} (${signing}); publish the relay's DKIM records if it signs for you.`,
    };
  }
  const name = `${dkim.selector}._domainkey.${dkim.domain}`;
  const expected = dkimRecordValue(dkim);
  const found = joined(await dns.txt(name));
  const base = { type: 'dkim' as const, name, found, expected };
  if (found.length === 0)
    return { ...base, status: 'missing', detail: `No DKIM record at ${name}: every signature fails; publish the expected value.` };
  const want = dkimTags(expected);
  const matches = found.filter((text) => {
    const tags = dkimTags(text);
    return tags.get('p') === want.get('p') && (tags.get('k') ?? 'rsa').toLowerCase() === want.get('k');
  });
  if (matches.length === 1 && found.length === 1)
    return { ...base, status: 'ok', detail: 'The record holds the public half of DKIM_PRIVATE_KEY_FILE.' };
  const detail =
    matches.length === 0
      ? `The record at ${name} holds another key than DKIM_PRIVATE_KEY_FILE: receivers cannot verify Hopper's signatures. Publish the expected value.`
      : `${found.length} records at ${name}: receivers take none. Keep only the expected value.`;
  return { ...base, status: 'wrong', detail };
}

async function checkDmarc(dns: DomainDns, domain: string): Promise<RecordCheck> {
  const name = `_dmarc.${domain}`;
  const found = joined(await dns.txt(name)).filter((text) => /^v=DMARC1\s*(;|$)/i.test(text));
  const expected = `v=DMARC1; p=none; rua=mailto:dmarc@${domain}`;
  const base = { type: 'dmarc' as const, name, found, expected };
  if (found.length === 0) {
    return {
      ...base,
      status: 'missing',
      detail: `No DMARC record at ${name}: Gmail and Yahoo require one of bulk senders (p=none at least).`,
    };
  }
  if (found.length > 1)
    return { ...base, status: 'wrong', detail: `${found.length} DMARC records: receivers apply none (RFC 7489 6.6.3).` };
  const tags = dkimTags(found[0] ?? '');
  const policy = tags.get('p')?.toLowerCase();
  if (!policy || !['none', 'quarantine', 'reject'].includes(policy)) {
    return { ...base, status: 'wrong', detail: 'The DMARC record has no valid policy (p=none, quarantine or reject).' };
  }
  const advice = tags.has('rua') ? '' : ' Add rua=mailto:… to receive the aggregate reports (advised).';
  return { ...base, status: 'ok', detail: `DMARC policy ${policy}.${advice}` };
}

async function checkMx(dns: DomainDns, inboundDomain: string, host: string): Promise<RecordCheck> {
  const records = await dns.mx(inboundDomain);
  const found = records.map((mx) => `${mx.priority} ${mx.exchange}`);
  const base = { type: 'mx' as const, name: inboundDomain, found, expected: `10 ${host}.` };
  if (records.length === 0) {
    return { ...base, status: 'missing', detail: `No MX for ${inboundDomain} (INBOUND_DOMAIN): replies and bounces cannot reach Hopper.` };
  }
  const ours = records.some((mx) => mx.exchange.toLowerCase().replace(/\.$/, '') === host.toLowerCase());
  if (!ours) return { ...base, status: 'wrong', detail: `The MX of ${inboundDomain} points elsewhere than this Hopper (${host}).` };
  return { ...base, status: 'ok', detail: `The MX of ${inboundDomain} points at ${host}.` };
}
