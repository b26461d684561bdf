import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Clock } from '../time.ts';
import { checkDomain, type DomainCheck, domainDns } from './domain-check.ts';

/**
 * DKIM_DOMAIN checked at start and every day after (docs/email-setup.md, "Checking it"): a DKIM
 * record that is missing or holds another key means every signature fails at every receiver
 * while Hopper keeps sending, so it is logged at warn. The latest check of each domain, whether
 * made here or asked for through `GET /v3/domains/{domain}/check`, is kept for the dashboard.
 */
const DAY_MS = 24 * 60 * 60 * 1000;
const latest = new WeakMap<Config, Map<string, DomainCheck>>();

/** Keeps a check as the latest of its domain. */
export function noteDomainCheck(config: Config, check: DomainCheck): void {
  const checks = latest.get(config) ?? new Map<string, DomainCheck>();
  latest.set(config, checks);
  checks.set(check.domain, check);
}

/**
 * The latest check of `domain` (DKIM_DOMAIN when not named) this process made, or undefined
 * before the first (or without DKIM_DOMAIN): what the dashboard shows.
 */
export function latestDomainCheck(config: Config, domain: string | undefined = config.dkim?.domain): DomainCheck | undefined {
  return domain === undefined ? undefined : latest.get(config)?.get(domain);
}

/** Checks DKIM_DOMAIN now and daily; `stop` ends it (the timer never holds the process open). */
export function watchDkimDomain(config: Config, clock: Clock, log: FastifyBaseLogger): { stop(): void } {
  const dkim = config.dkim;
  if (!dkim) return { stop() {} };
  const dns = domainDns(config.dnsServers);
  const run = async () => {
    try {
      const check = await checkDomain(config, dns, dkim.domain, clock());
      noteDomainCheck(config, check);
      const record = check.records.find((r) => r.type === 'dkim');
      if (record && record.status !== 'ok') {
        log.warn({ domain: check.domain, dkim: record }, `DKIM for ${check.domain} is ${record.status}: ${record.detail}`);
      }
    } catch (error) {
      log.warn({ err: error, domain: dkim.domain }, 'the domain check of DKIM_DOMAIN failed');
    }
  };
  void run();
  const timer = setInterval(run, DAY_MS);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      dns.cancel();
    },
  };
}
