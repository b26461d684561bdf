import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { Resolver } from 'node:dns';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import proxyAddr from '@fastify/proxy-addr';
import { parseApiKey } from './api-key-format.ts';

const ROLES = ['all', 'api', 'worker'] as const;
const MEDIA_STORES = ['disk', 'postgres', 's3'] as const;
type MediaStoreKind = (typeof MEDIA_STORES)[number];

interface MediaS3Settings {
  readonly bucket: string;
  /** Prepended to every key, e.g. `hopper/`. */
  readonly prefix: string;
  readonly region: string;
  /** An S3-compatible server's address; AWS's own when unset. */
  readonly endpoint: string | undefined;
  readonly forcePathStyle: boolean;
  /** AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) when set; else the AWS SDK's own chain (profile, instance role). */
  readonly credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | undefined;
}
type ProcessRole = (typeof ROLES)[number];

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  /** PostgreSQL schema holding Hopper's tables (lets tests and several instances share a database). */
  readonly databaseSchema: string;
  /** How long a request waits to connect to PostgreSQL, and for each statement, before answering 503. */
  readonly databaseTimeoutMs: number;
  /** How long a stopping process lets requests in flight finish (SHUTDOWN_TIMEOUT). */
  readonly shutdownTimeoutMs: number;
  readonly publicUrl: string;
  readonly tlsCertFile: string | undefined;
  readonly tlsKeyFile: string | undefined;
  /** Behind a TLS-terminating proxy (TRUST_PROXY): plain HTTP, and X-Forwarded-For read for the client's address. */
  readonly trustProxy: boolean;
  /**
   * The proxies whose X-Forwarded-For entries are trusted (addresses, CIDRs, or proxy-addr's names
   * `loopback`, `linklocal`, `uniquelocal`); empty with `trustProxy`: the one that connects to Hopper.
   */
  readonly trustedProxies: readonly string[];
  readonly bootstrapAdminKey: string | undefined;
  readonly gracePeriodMs: number;
  readonly smtpUrl: string | undefined;
  /** The relay SMTP_URL points at (SMTP_RELAY, else guessed from its host): decides which relay-specific header goes out. */
  readonly smtpRelay: SmtpRelay;
  readonly mailFrom: string;
  /** SMTP connections kept open by the pool, per worker process. */
  readonly smtpMaxConnections: number;
  /** Messages per second per worker process; 0 for no limit. */
  readonly smtpRateLimit: number;
  /** The first back-off of the SMTP pool after a relay's slow-down answer, doubled per answer in a row (SMTP_BACKOFF_BASE). */
  readonly smtpBackoffBaseMs: number;
  /** First retry delay after a temporary delivery failure (doubled per attempt). */
  readonly sendRetryBaseMs: number;
  /** How long a worker's claim on a delivery lasts before another worker may take it over. */
  readonly sendLeaseMs: number;
  /**
   * How often the job queue looks for jobs whose worker died (silent heartbeat) to retry them:
   * after a crash, a webhook endpoint's events wait up to this (plus the 10 s heartbeat).
   */
  readonly jobSuperviseIntervalMs: number;
  /** Deliveries a delivery job claims per round trip; also bounds how many `sent` records one statement holds. */
  readonly sendBatchSize: number;
  /** The complaint and bounce brakes (docs/sending.md, "Brakes"). */
  readonly brakes: BrakeConfig;
  readonly role: ProcessRole;
  readonly logLevel: string;
  /** Where media bytes live: the local disk, the database, or an S3-compatible bucket (docs/media.md). */
  readonly mediaStore: MediaStoreKind;
  /** The bucket of MEDIA_STORE=s3. */
  readonly mediaS3: MediaS3Settings | undefined;
  /** Where the local-disk media store keeps files (DATA_DIR/media unless MEDIA_DIR says otherwise). */
  readonly mediaDir: string;
  /** Largest media file accepted, by upload or by URL. */
  readonly mediaMaxBytes: number;
  /** How long fetching a media `full_url` may take, headers and body together. */
  readonly mediaFetchTimeoutMs: number;
  /** Lets media URLs point at loopback/private addresses; off by default, as that is how SSRF reaches internal services. */
  readonly mediaFetchAllowPrivate: boolean;
  /** SendGrid's Event Webhook verification key (ECDSA P-256); unset: the webhook refuses every post. */
  readonly sendgridWebhookKey: KeyObject | undefined;
  /** The Sandbox voicemail provider (drops recorded under DATA_DIR/voicemail); on unless SANDBOX_VOICEMAIL=false. */
  readonly sandboxVoicemail: boolean;
  /** How long after a Sandbox drop its outcome is reported. */
  readonly sandboxDelayMs: number;
  /** Slybroadcast's credentials and endpoint; undefined: the provider is not configured. */
  readonly slybroadcast: SlybroadcastConfig | undefined;
  /** How long a Slybroadcast drop may wait for its disposition before Hopper asks (callstatus). */
  readonly slybroadcastResultTimeoutMs: number;
  /** Drop Cowboy's credentials, endpoint and webhook signing secret; undefined: not configured. */
  readonly dropCowboy: DropCowboyConfig | undefined;
  /** Domains authenticated at the relay: a sender address in one of them is used as From. */
  readonly senderDomains: readonly string[];
  /** The operator's postal address, for users who have none. */
  readonly mailPostalAddress: string | undefined;
  /** DKIM signing of emails whose From is this domain or a subdomain; undefined: no signing. */
  readonly dkim: DkimConfig | undefined;
  /** The inbound mail receiver (replies, bounces, complaints); undefined: off. */
  readonly inbound: InboundConfig | undefined;
  /** DNS servers (host or host:port) the domain check and the inbound SPF, DKIM and DMARC checks ask; empty: the system's. */
  readonly dnsServers: readonly string[];
  /** Basic credentials Postmark's webhook must send; undefined: the webhook refuses every post. */
  readonly postmarkWebhook: { readonly user: string; readonly password: string } | undefined;
  /** The open pixel in every email (TRACK_OPENS, default false: docs/decisions.md, "Opens are not tracked by default"). */
  readonly trackOpens: boolean;
  /** SNS topics whose notifications the SES webhook accepts; empty: the webhook refuses every post. */
  readonly sesTopicArns: readonly string[];
  /** Outbound webhooks (docs/webhooks.md). */
  readonly webhooks: WebhookConfig;
  /** Requests per minute per API key (or per client address without one), shared by every API process. */
  readonly rateLimit: number;
  /** Requests per minute per user across all of their keys (RATE_LIMIT_PER_USER; default twice RATE_LIMIT; 0: none). */
  readonly rateLimitPerUser: number;
  /** Live API keys a user may hold at once (API_KEYS_PER_USER). */
  readonly apiKeysPerUser: number;
  /** When set, the rate-limit counts live in this Redis instead of PostgreSQL. */
  readonly redisUrl: string | undefined;
  /** When set, `GET /metrics` answers a bearer of this token; unset, there is no /metrics. */
  readonly metricsToken: string | undefined;
}

const SMTP_RELAYS = ['sendgrid', 'postmark', 'ses', 'other'] as const;
export type SmtpRelay = (typeof SMTP_RELAYS)[number];

export interface BrakeConfig {
  /** Spam reports per email accepted above which a user's sending pauses (a fraction: 0.003 is 0.3 %). */
  readonly complaintRate: number;
  /** Hard bounces per email sent above which it pauses. */
  readonly hardBounceRate: number;
  /** Emails sent in the window before either rate counts. */
  readonly minimumSent: number;
  /** How far back the rates look. */
  readonly windowMs: number;
}

export interface DkimConfig {
  readonly domain: string;
  readonly selector: string;
  /** The PEM private key (RSA of 2048 bits or more, or Ed25519). */
  readonly privateKey: string;
}

export interface InboundConfig {
  readonly domain: string;
  readonly host: string;
  readonly port: number;
  readonly maxBytes: number;
  /** Replies forwarded to the sender per reply address (delivery) in any 24 hours; the rest are held. */
  readonly forwardsPerDay: number;
  /**
   * The feedback loops whose reports count wherever they arrive, once authenticated: each an
   * address (`staff@hotmail.com`), or a domain whose every address is the loop's, with its
   * subdomains (`amazonses.com`). Lower case.
   */
  readonly feedbackLoops: readonly string[];
}

export interface WebhookConfig {
  /** Allow http:// endpoint URLs (otherwise https only). */
  readonly allowHttp: boolean;
  /** Allow endpoints that resolve to loopback, private or link-local addresses. */
  readonly allowPrivate: boolean;
  readonly timeoutMs: number;
  /** Requests in flight per endpoint at most. */
  readonly maxInFlight: number;
  /** First retry delay (doubled per attempt, with jitter). */
  readonly retryBaseMs: number;
  /** How long a delivery is retried, and how long an endpoint may fail before it is disabled. */
  readonly retryForMs: number;
  /** How often a worker looks for due webhook deliveries (retries falling due; new events wake it at once). */
  readonly pollMs: number;
  /** How long events, deliveries and attempts are kept once done. */
  readonly retentionMs: number;
  /** A PEM file of extra certificate authorities trusted for endpoint URLs (a private CA). */
  readonly caFile: string | undefined;
  /** Events a user's endpoints may be resent in an hour (WEBHOOK_RESEND_PER_HOUR). */
  readonly resendPerHour: number;
}

export interface SlybroadcastConfig {
  readonly uid: string;
  readonly password: string;
  readonly url: string;
  /** Send `mobile_only=1`: Slybroadcast removes landlines before dropping (SLYBROADCAST_MOBILE_ONLY, default true). */
  readonly mobileOnly: boolean;
}

export interface DropCowboyConfig {
  readonly key: string;
  readonly secret: string;
  /** The API's base URL; routes (`/rvm`, `/media/public/media`, …) are appended. */
  readonly url: string;
  /** The signing secrets of the account's webhooks (one per webhook); empty: signed webhooks refused. */
  readonly webhookSecrets: readonly string[];
  /** The phone line to send from; undefined: the account's default line, looked up once. */
  readonly phoneLineId: string | undefined;
  /** Bring-your-own-carrier account: send `caller_id` (the drop's callback number) instead of a line. */
  readonly byoc: boolean;
  /** Send the audio as `audio_url` (only where Drop Cowboy's support enabled it) instead of `media_id`. */
  readonly audioUrl: boolean;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const DURATION_UNITS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Parses `500ms`, `30s`, `15m`, `2h`, `14d` into milliseconds; returns undefined for anything else. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d{1,6})(ms|s|m|h|d)$/.exec(text.trim());
  if (!match) return undefined;
  return Number(match[1]) * DURATION_UNITS[match[2] as keyof typeof DURATION_UNITS];
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Reads the environment once. Every problem is collected so the operator fixes them in one go;
 * each message names the variable and the form it accepts. Each section of the configuration is
 * read by a function of its own, below.
 */
export function loadConfig(env: Env = process.env): Config {
  const read = new EnvReader(env);
  const server = serverSettings(read);
  const config = {
    ...server,
    ...databaseSettings(read, server.role),
    ...mailSettings(read, server.host),
    ...sendingSettings(read),
    ...mediaSettings(read, server.dataDir, Boolean(env.DATABASE_URL?.trim())),
    ...voicemailSettings(read),
    webhooks: webhookSettings(read),
    ...limitSettings(read),
  };
  refuseLocalhostMail(read, config);
  if (read.problems.length > 0) throw new ConfigError(`Invalid configuration:\n  - ${read.problems.join('\n  - ')}`);
  return Object.freeze(config);
}

/** The environment's variables as typed values, each problem noted (`problems`) with a usable stand-in returned. */
class EnvReader {
  readonly problems: string[] = [];
  readonly #env: Env;

  constructor(env: Env) {
    this.#env = env;
  }

  /** A variable's trimmed text; undefined when unset or blank. */
  text(name: string): string | undefined {
    const value = this.#env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  }

  problem(message: string): void {
    this.problems.push(message);
  }

  integer(name: string, fallback: number, min: number, max: number): number {
    const value = this.text(name) ?? String(fallback);
    const n = Number(value);
    if (/^\d+$/.test(value) && n >= min && n <= max) return n;
    this.problem(`${name} must be an integer from ${min} to ${max} (got "${value}")`);
    // The default stands in, so that what is derived from it (RATE_LIMIT_PER_USER) blames no one else.
    return fallback;
  }

  duration(name: string, fallback: string): number {
    const value = this.text(name) ?? fallback;
    const ms = parseDuration(value);
    if (ms === undefined || ms === 0) this.problem(`${name} must look like 500ms, 30s, 15m or 2h (got "${value}")`);
    return ms ?? 0;
  }

  /** A percentage (`0.3`, `5`, `0.3%`) from 0 to 100, as a fraction (0.003, 0.05). */
  percent(name: string, fallback: number): number {
    const value = this.text(name) ?? String(fallback);
    const n = Number(value.replace(/\s*%$/, ''));
    if (/^\d+(\.\d+)?\s*%?$/.test(value) && n <= 100) return n / 100;
    this.problem(`${name} must be a percentage from 0 to 100 such as 0.3 (got "${value}")`);
    return fallback / 100;
  }

  boolean(name: string, fallback: boolean): boolean {
    const value = this.text(name) ?? String(fallback);
    if (/^(true|1|yes)$/i.test(value)) return true;
    if (/^(false|0|no)$/i.test(value)) return false;
    this.problem(`${name} must be true or false (got "${value}")`);
    return false;
  }

  /** A comma list, its items trimmed, blank ones dropped. */
  list(name: string): string[] {
    return (this.text(name) ?? '')
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean);
  }

  /**
   * A URL of one of `schemes` (`postgres` accepts postgresql:// too); undefined when unset, or when
   * not such a URL (a problem then, which does not repeat it: it may hold a password).
   */
  url(name: string, schemes: string, form: string): string | undefined {
    const value = this.text(name);
    if (!value || new RegExp(`^(${schemes}):\\/\\/`).test(value)) return value;
    this.problem(`${name} must be ${form}`);
    return undefined;
  }

  /** A provider's settings: all of its credentials, or none (not configured); the URL has a default. */
  provider<K extends string>(label: string, names: Record<K, string>, urlName: string, defaultUrl: string) {
    const entries = Object.entries<string>(names).map(([field, name]) => [field, name, this.text(name)] as const);
    const missing = entries.filter(([, , value]) => value === undefined).map(([, name]) => name);
    const url = this.text(urlName) ?? defaultUrl;
    if (!isHttpUrl(url)) this.problem(`${urlName} must be an absolute http(s) URL (got "${url}")`);
    if (missing.length === entries.length) return undefined;
    if (missing.length > 0) {
      this.problem(`${label} needs ${entries.map(([, name]) => name).join(', ')} together; missing: ${missing.join(', ')}`);
      return undefined;
    }
    const values = Object.fromEntries(entries.map(([field, , value]) => [field, value])) as Record<K, string>;
    return Object.freeze({ ...values, url });
  }
}

/** The process: where it listens and keeps its data, its role, TLS, the first Administrator, logging. */
function serverSettings(read: EnvReader) {
  const port = read.integer('PORT', 8443, 0, 65_535);
  const publicUrlText = read.text('PUBLIC_URL');
  const publicUrl = (publicUrlText ?? `https://localhost:${port}`).replace(/\/+$/, '');
  // Only a PUBLIC_URL given is judged: the default is made of PORT, whose own problem says what is wrong.
  if (publicUrlText !== undefined && !isHttpUrl(publicUrl)) {
    read.problem(`PUBLIC_URL must be an absolute http(s) URL such as https://hopper.example.com (got "${publicUrlText}")`);
  }
  const tlsCertFile = read.text('TLS_CERT_FILE');
  const tlsKeyFile = read.text('TLS_KEY_FILE');
  if (Boolean(tlsCertFile) !== Boolean(tlsKeyFile)) read.problem('TLS_CERT_FILE and TLS_KEY_FILE must be set together (PEM files)');
  const bootstrapAdminKey = read.text('BOOTSTRAP_ADMIN_KEY');
  if (bootstrapAdminKey && !parseApiKey(bootstrapAdminKey)) {
    read.problem('BOOTSTRAP_ADMIN_KEY must be a Hopper API key: hop_ + 40 base62 characters + 6-character checksum');
  }
  const graceText = read.text('GRACE_PERIOD') ?? '14d';
  const gracePeriodMs = parseDuration(graceText);
  if (gracePeriodMs === undefined) read.problem(`GRACE_PERIOD must look like 30s, 15m, 2h or 14d (got "${graceText}")`);
  const roleText = read.text('ROLE') ?? 'all';
  const role = ROLES.find((r) => r === roleText);
  if (!role) read.problem(`ROLE must be one of ${ROLES.join(', ')} (got "${roleText}")`);
  const logLevel = read.text('LOG_LEVEL') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) read.problem(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  return {
    port,
    host: read.text('HOST') ?? '127.0.0.1',
    dataDir: resolve(read.text('DATA_DIR') ?? './data'),
    shutdownTimeoutMs: read.duration('SHUTDOWN_TIMEOUT', '10s'),
    publicUrl,
    tlsCertFile,
    tlsKeyFile,
    ...proxySettings(read),
    bootstrapAdminKey,
    gracePeriodMs: gracePeriodMs ?? 0,
    role: role ?? 'all',
    logLevel,
  };
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * TRUST_PROXY: `false`; `true`, the one proxy that connects to Hopper (whatever its address); or a
 * comma list of the proxies' addresses and CIDRs (`10.0.0.0/8, 2001:db8::1`), for a chain of them
 * or to accept X-Forwarded-For only from these. Each entry is checked by proxy-addr, which Fastify
 * uses to read the header.
 */
function proxySettings(read: EnvReader): { trustProxy: boolean; trustedProxies: readonly string[] } {
  const value = read.text('TRUST_PROXY') ?? 'false';
  if (/^(true|1|yes)$/i.test(value)) return { trustProxy: true, trustedProxies: Object.freeze([]) };
  if (/^(false|0|no)$/i.test(value)) return { trustProxy: false, trustedProxies: Object.freeze([]) };
  const list = read.list('TRUST_PROXY');
  const bad = list.filter((entry) => {
    try {
      proxyAddr.compile(entry);
      return false;
    } catch {
      return true;
    }
  });
  if (bad.length > 0) {
    read.problem(
      `TRUST_PROXY must be true, false, or a comma list of addresses or CIDRs of the proxies in front of Hopper, such as 10.0.0.0/8, 2001:db8::1 (got ${bad.map((entry) => `"${entry}"`).join(', ')})`,
    );
    return { trustProxy: false, trustedProxies: Object.freeze([]) };
  }
  return { trustProxy: true, trustedProxies: Object.freeze(list) };
}

/** PostgreSQL instead of the embedded PGlite, its schema and its time limits. */
function databaseSettings(read: EnvReader, role: ProcessRole) {
  const databaseUrl = read.url('DATABASE_URL', 'postgres|postgresql', 'a postgres:// or postgresql:// URL');
  const databaseSchema = read.text('DATABASE_SCHEMA') ?? 'public';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(databaseSchema))
    read.problem('DATABASE_SCHEMA must be a lower-case SQL identifier (letters, digits, _)');
  if (role !== 'all' && !databaseUrl) read.problem(`ROLE=${role} needs DATABASE_URL: the embedded PGlite database allows one process only`);
  return { databaseUrl, databaseSchema, databaseTimeoutMs: read.duration('DATABASE_TIMEOUT', '1s') };
}

/** Email out (SMTP, sender identity, DKIM, tracking), the relays' event webhooks, and the inbound receiver. */
function mailSettings(read: EnvReader, host: string) {
  const senderDomains = read.list('SENDER_DOMAINS').map((domain) => domain.toLowerCase());
  for (const domain of senderDomains) if (!isDomain(domain)) read.problem(`SENDER_DOMAINS must list domain names (got "${domain}")`);
  const sendgridKeyText = read.text('SENDGRID_WEBHOOK_PUBLIC_KEY');
  const sendgridWebhookKey = sendgridKeyText === undefined ? undefined : parseEcP256PublicKey(sendgridKeyText);
  if (sendgridKeyText !== undefined && !sendgridWebhookKey) {
    read.problem(
      'SENDGRID_WEBHOOK_PUBLIC_KEY must be the ECDSA P-256 verification key SendGrid shows for the signed Event Webhook (base64, or PEM)',
    );
  }
  const smtpUrl = read.url('SMTP_URL', 'smtps?', 'an smtp:// or smtps:// URL');
  const postmarkUser = read.text('POSTMARK_WEBHOOK_USER');
  const postmarkPassword = read.text('POSTMARK_WEBHOOK_PASSWORD');
  if (Boolean(postmarkUser) !== Boolean(postmarkPassword))
    read.problem('POSTMARK_WEBHOOK_USER and POSTMARK_WEBHOOK_PASSWORD must be set together');
  return {
    smtpUrl,
    smtpRelay: smtpRelay(read, smtpUrl),
    mailFrom: read.text('MAIL_FROM') ?? 'Hopper <no-reply@localhost>',
    smtpMaxConnections: read.integer('SMTP_MAX_CONNECTIONS', 5, 1, 100),
    smtpRateLimit: read.integer('SMTP_RATE_LIMIT', 0, 0, 100_000),
    smtpBackoffBaseMs: read.duration('SMTP_BACKOFF_BASE', '1s'),
    senderDomains: Object.freeze(senderDomains),
    mailPostalAddress: read.text('MAIL_POSTAL_ADDRESS')?.replace(/\\n/g, '\n'),
    dkim: dkimSettings(read),
    trackOpens: read.boolean('TRACK_OPENS', false),
    sendgridWebhookKey,
    postmarkWebhook: postmarkUser && postmarkPassword ? Object.freeze({ user: postmarkUser, password: postmarkPassword }) : undefined,
    sesTopicArns: Object.freeze(snsTopicArns(read)),
    inbound: inboundSettings(read, host),
    dnsServers: Object.freeze(dnsServers(read)),
  };
}

/** SES_TOPIC_ARNS: SNS topic ARNs (`arn:aws:sns:us-east-1:123456789012:hopper-ses`, any AWS partition). */
function snsTopicArns(read: EnvReader): string[] {
  const arns = read.list('SES_TOPIC_ARNS');
  const bad = arns.filter((arn) => !/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/.test(arn));
  if (bad.length > 0) {
    read.problem(
      `SES_TOPIC_ARNS must list SNS topic ARNs such as arn:aws:sns:us-east-1:123456789012:hopper-ses (got ${bad.map((arn) => `"${arn}"`).join(', ')})`,
    );
  }
  return arns;
}

/** SMTP_RELAY, or the relay SMTP_URL's host belongs to (smtp.sendgrid.net, smtp.postmarkapp.com, email-smtp.*.amazonaws.com). */
function smtpRelay(read: EnvReader, smtpUrl: string | undefined): SmtpRelay {
  const named = read.text('SMTP_RELAY')?.toLowerCase();
  if (named !== undefined) {
    const relay = SMTP_RELAYS.find((r) => r === named);
    if (!relay) read.problem(`SMTP_RELAY must be one of ${SMTP_RELAYS.join(', ')} (got "${named}")`);
    return relay ?? 'other';
  }
  let host = '';
  try {
    host = smtpUrl ? new URL(smtpUrl).hostname.toLowerCase() : '';
  } catch {
    return 'other';
  }
  if (host === 'sendgrid.net' || host.endsWith('.sendgrid.net')) return 'sendgrid';
  if (host === 'postmarkapp.com' || host.endsWith('.postmarkapp.com')) return 'postmark';
  if (/^email-smtp(-fips)?\.[a-z0-9-]+\.amazonaws\.com$/.test(host)) return 'ses';
  return 'other';
}

/** DKIM_DOMAIN, DKIM_SELECTOR and DKIM_PRIVATE_KEY_FILE together, the key read and checked now. */
function dkimSettings(read: EnvReader): DkimConfig | undefined {
  const domain = read.text('DKIM_DOMAIN')?.toLowerCase();
  const selector = read.text('DKIM_SELECTOR');
  const file = read.text('DKIM_PRIVATE_KEY_FILE');
  if (!domain && !selector && !file) return undefined;
  if (!domain || !selector || !file) {
    read.problem('DKIM_DOMAIN, DKIM_SELECTOR and DKIM_PRIVATE_KEY_FILE must be set together');
    return undefined;
  }
  if (!isDomain(domain)) read.problem(`DKIM_DOMAIN must be a domain name (got "${domain}")`);
  if (!/^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62})$/.test(selector)) read.problem(`DKIM_SELECTOR must be a DNS label (got "${selector}")`);
  let privateKey: string;
  try {
    privateKey = readFileSync(file, 'utf8');
  } catch (error) {
    read.problem(`DKIM_PRIVATE_KEY_FILE cannot be read (${(error as Error).message})`);
    return undefined;
  }
  try {
    const key = createPrivateKey(privateKey);
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (!(key.asymmetricKeyType === 'ed25519' || (key.asymmetricKeyType === 'rsa' && bits >= 2048))) {
      read.problem(`DKIM_PRIVATE_KEY_FILE must hold an RSA key of 2048 bits or more, or an Ed25519 key (${file})`);
    }
  } catch {
    read.problem(`DKIM_PRIVATE_KEY_FILE is not a PEM private key (${file})`);
    return undefined;
  }
  return Object.freeze({ domain, selector, privateKey });
}

/** The inbound mail receiver, on when INBOUND_DOMAIN is set. */
function inboundSettings(read: EnvReader, host: string): InboundConfig | undefined {
  const domain = read.text('INBOUND_DOMAIN')?.toLowerCase();
  if (!domain) return undefined;
  if (!isDomain(domain)) read.problem(`INBOUND_DOMAIN must be a domain name (got "${domain}")`);
  return Object.freeze({
    domain,
    host: read.text('INBOUND_SMTP_HOST') ?? host,
    port: read.integer('INBOUND_SMTP_PORT', 2525, 0, 65_535),
    maxBytes: read.integer('INBOUND_MAX_BYTES', 10 * 1024 * 1024, 1024, 1024 ** 3),
    forwardsPerDay: read.integer('INBOUND_FORWARDS_PER_DAY', 20, 1, 100_000),
    feedbackLoops: Object.freeze(feedbackLoops(read)),
  });
}

/**
 * INBOUND_FEEDBACK_LOOPS, or the loops every sender meets: Microsoft's JMRP, Yahoo's and AOL's
 * complaint feedback loops, and Amazon SES's feedback forwarding (its bounces and complaints come
 * from amazonses.com, where no SES customer may send from). `none`: no loop at all.
 */
const FEEDBACK_LOOPS = ['staff@hotmail.com', 'feedback@arf.mail.yahoo.com', 'scomp@aol.net', 'amazonses.com'];

function feedbackLoops(read: EnvReader): string[] {
  const given = read.text('INBOUND_FEEDBACK_LOOPS');
  if (given === undefined) return FEEDBACK_LOOPS;
  if (given.trim().toLowerCase() === 'none') return [];
  const loops = read.list('INBOUND_FEEDBACK_LOOPS').map((loop) => loop.toLowerCase());
  for (const loop of loops) {
    const at = loop.lastIndexOf('@');
    if (!isDomain(loop.slice(at + 1)) || at === 0) {
      read.problem(`INBOUND_FEEDBACK_LOOPS must list addresses or domain names, or be none (got "${loop}")`);
    }
  }
  return loops;
}

/** DNS_SERVERS (INBOUND_DNS_SERVERS, its old name): addresses (IPv4, IPv6, either with a port) Node's resolver accepts. */
function dnsServers(read: EnvReader): string[] {
  const name =
    read.text('DNS_SERVERS') === undefined && read.text('INBOUND_DNS_SERVERS') !== undefined ? 'INBOUND_DNS_SERVERS' : 'DNS_SERVERS';
  const servers = read.list(name);
  try {
    if (servers.length > 0) new Resolver().setServers(servers);
  } catch {
    read.problem(`${name} must list DNS server addresses such as 192.0.2.53 or [2001:db8::53]:5353 (got "${servers.join(', ')}")`);
  }
  return servers;
}

/** JOB_SUPERVISE_INTERVAL: from a second to an hour (the job queue's own bounds are a second and a day). */
function jobSuperviseInterval(read: EnvReader): number {
  const ms = read.duration('JOB_SUPERVISE_INTERVAL', '60s');
  // 0: not a duration at all, already reported.
  if (ms > 0 && (ms < 1000 || ms > 3_600_000))
    read.problem(`JOB_SUPERVISE_INTERVAL must be from 1s to 1h (got "${read.text('JOB_SUPERVISE_INTERVAL')}")`);
  return ms;
}

/** The sending engine: retries, leases, batches. */
function sendingSettings(read: EnvReader) {
  return {
    sendRetryBaseMs: read.duration('SEND_RETRY_BASE', '30s'),
    sendLeaseMs: read.duration('SEND_LEASE', '10s'),
    jobSuperviseIntervalMs: jobSuperviseInterval(read),
    sendBatchSize: read.integer('SEND_BATCH_SIZE', 100, 1, 1000),
    brakes: Object.freeze({
      complaintRate: read.percent('BRAKE_COMPLAINT_RATE', 0.3),
      hardBounceRate: read.percent('BRAKE_HARD_BOUNCE_RATE', 5),
      minimumSent: read.integer('BRAKE_MINIMUM_SENT', 100, 1, 1_000_000_000),
      windowMs: read.duration('BRAKE_WINDOW', '30d'),
    }),
  };
}

function s3Credentials(read: EnvReader): MediaS3Settings['credentials'] {
  const accessKeyId = read.text('AWS_ACCESS_KEY_ID');
  const secretAccessKey = read.text('AWS_SECRET_ACCESS_KEY');
  if (!accessKeyId && !secretAccessKey) return undefined;
  if (!accessKeyId || !secretAccessKey) {
    read.problem('AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together: set both or neither');
    return undefined;
  }
  const sessionToken = read.text('AWS_SESSION_TOKEN');
  return sessionToken ? { accessKeyId, secretAccessKey, sessionToken } : { accessKeyId, secretAccessKey };
}

/** Where media files live, how large they may be, and how a media URL is fetched. */
function mediaSettings(read: EnvReader, dataDir: string, onPostgres: boolean) {
  // In the database by default on PostgreSQL: every API process then serves every file.
  const storeText = read.text('MEDIA_STORE') ?? (onPostgres ? 'postgres' : 'disk');
  const mediaStore = MEDIA_STORES.find((s) => s === storeText);
  if (!mediaStore) read.problem(`MEDIA_STORE must be one of ${MEDIA_STORES.join(', ')} (got "${storeText}")`);
  let mediaS3: MediaS3Settings | undefined;
  if (mediaStore === 's3') {
    const bucket = read.text('MEDIA_S3_BUCKET');
    if (!bucket) read.problem('MEDIA_STORE=s3 needs MEDIA_S3_BUCKET');
    const endpoint = read.url('MEDIA_S3_ENDPOINT', 'https?', 'an http:// or https:// URL');
    const prefix = read.text('MEDIA_S3_PREFIX') ?? '';
    if (prefix && !/^[A-Za-z0-9!_.*'()/-]{1,200}$/.test(prefix)) {
      read.problem(`MEDIA_S3_PREFIX may hold letters, digits and !_.*'()/- only (got "${prefix}")`);
    }
    mediaS3 = {
      bucket: bucket ?? '',
      prefix,
      region: read.text('MEDIA_S3_REGION') ?? read.text('AWS_REGION') ?? 'us-east-1',
      endpoint,
      // S3-compatible servers are usually addressed by path; AWS itself by virtual host.
      forcePathStyle: read.boolean('MEDIA_S3_FORCE_PATH_STYLE', endpoint !== undefined),
      credentials: s3Credentials(read),
    };
  }
  const fetchTimeoutText = read.text('MEDIA_FETCH_TIMEOUT') ?? '30s';
  const mediaFetchTimeoutMs = parseDuration(fetchTimeoutText);
  if (mediaFetchTimeoutMs === undefined || mediaFetchTimeoutMs === 0) {
    read.problem(`MEDIA_FETCH_TIMEOUT must look like 30s or 2m (got "${fetchTimeoutText}")`);
  }
  return {
    mediaStore: mediaStore ?? 'disk',
    mediaS3,
    mediaDir: resolve(read.text('MEDIA_DIR') ?? join(dataDir, 'media')),
    mediaMaxBytes: read.integer('MEDIA_MAX_BYTES', 20 * 1024 * 1024, 1, 4 * 1024 ** 3),
    mediaFetchTimeoutMs: mediaFetchTimeoutMs ?? 0,
    mediaFetchAllowPrivate: read.boolean('MEDIA_FETCH_ALLOW_PRIVATE', false),
  };
}

/** The voicemail providers: the Sandbox, Slybroadcast and Drop Cowboy. */
function voicemailSettings(read: EnvReader) {
  const slybroadcast = read.provider(
    'Slybroadcast',
    { uid: 'SLYBROADCAST_UID', password: 'SLYBROADCAST_PASSWORD' },
    'SLYBROADCAST_URL',
    'https://www.mobile-sphere.com/gateway/vmb.php',
  );
  return {
    sandboxVoicemail: read.boolean('SANDBOX_VOICEMAIL', true),
    sandboxDelayMs: read.duration('SANDBOX_DELAY', '2s'),
    slybroadcast: slybroadcast && { ...slybroadcast, mobileOnly: read.boolean('SLYBROADCAST_MOBILE_ONLY', true) },
    slybroadcastResultTimeoutMs: read.duration('SLYBROADCAST_RESULT_TIMEOUT', '2h'),
    dropCowboy: dropCowboySettings(read),
  };
}

function dropCowboySettings(read: EnvReader): DropCowboyConfig | undefined {
  const credentials = read.provider(
    'Drop Cowboy',
    { key: 'DROPCOWBOY_KEY', secret: 'DROPCOWBOY_SECRET' },
    'DROPCOWBOY_URL',
    'https://api-v2.dropcowboy.com',
  );
  if (read.text('DROPCOWBOY_WEBHOOK_SECRET') !== undefined) {
    read.problem(
      'DROPCOWBOY_WEBHOOK_SECRET is now DROPCOWBOY_WEBHOOK_SECRETS: the signing secrets of your Drop Cowboy webhooks, comma separated',
    );
  }
  if (/\/rvm\/*$/.test(read.text('DROPCOWBOY_URL') ?? '')) {
    read.problem('DROPCOWBOY_URL is the API base URL (such as https://api-v2.dropcowboy.com), without /rvm');
  }
  if (!credentials) return undefined;
  return Object.freeze({
    ...credentials,
    url: credentials.url.replace(/\/+$/, ''),
    webhookSecrets: Object.freeze(read.list('DROPCOWBOY_WEBHOOK_SECRETS')),
    phoneLineId: read.text('DROPCOWBOY_PHONE_LINE_ID'),
    byoc: read.boolean('DROPCOWBOY_BYOC', false),
    audioUrl: read.boolean('DROPCOWBOY_AUDIO_URL', false),
  });
}

/** Outbound webhooks (docs/webhooks.md). */
function webhookSettings(read: EnvReader): WebhookConfig {
  return Object.freeze({
    allowHttp: read.boolean('WEBHOOK_ALLOW_HTTP', false),
    allowPrivate: read.boolean('WEBHOOK_ALLOW_PRIVATE', false),
    timeoutMs: read.duration('WEBHOOK_TIMEOUT', '15s'),
    maxInFlight: read.integer('WEBHOOK_MAX_IN_FLIGHT', 16, 1, 1000),
    retryBaseMs: read.duration('WEBHOOK_RETRY_BASE', '10s'),
    retryForMs: read.duration('WEBHOOK_RETRY_FOR', '3d'),
    pollMs: read.duration('WEBHOOK_POLL_INTERVAL', '1s'),
    retentionMs: read.duration('WEBHOOK_RETENTION', '30d'),
    caFile: read.text('WEBHOOK_CA_FILE'),
    resendPerHour: read.integer('WEBHOOK_RESEND_PER_HOUR', 10_000, 1, 10_000_000),
  });
}

/** Rate limits (in PostgreSQL, or Redis), how many keys a user may hold, and /metrics. */
function limitSettings(read: EnvReader) {
  const metricsToken = read.text('METRICS_TOKEN');
  if (metricsToken !== undefined && metricsToken.length < 16) read.problem('METRICS_TOKEN must be at least 16 characters');
  const rateLimit = read.integer('RATE_LIMIT', 600, 1, 10_000_000);
  return {
    rateLimit,
    rateLimitPerUser: read.integer('RATE_LIMIT_PER_USER', Math.min(2 * rateLimit, 10_000_000), 0, 10_000_000),
    apiKeysPerUser: read.integer('API_KEYS_PER_USER', 20, 1, 10_000),
    redisUrl: read.url('REDIS_URL', 'rediss?', 'a redis:// or rediss:// URL'),
    metricsToken,
  };
}

/**
 * An ECDSA P-256 public key as SendGrid shows it (base64 of the DER SubjectPublicKeyInfo, maybe
 * wrapped over several lines) or as PEM (whose line breaks may arrive as literal `\n` from an
 * env file). Undefined when it is neither, or a key of another kind or curve.
 */
function parseEcP256PublicKey(text: string): KeyObject | undefined {
  try {
    const pem = text.replace(/\\n/g, '\n');
    const key = pem.includes('-----BEGIN')
      ? createPublicKey(pem)
      : createPublicKey({ key: Buffer.from(text.replace(/\s+/g, ''), 'base64'), format: 'der', type: 'spki' });
    return key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1' ? key : undefined;
  } catch {
    return undefined;
  }
}

/**
 * With SMTP_URL set, mail goes to real people: a From at localhost, Message-IDs `@localhost` and
 * links to `https://localhost:…` would all be unusable (and spam-scored). PUBLIC_URL and MAIL_FROM
 * default to localhost for trying Hopper out with the outbox; they must name the real host once
 * real mail goes out.
 */
function refuseLocalhostMail(read: EnvReader, config: { smtpUrl: string | undefined; publicUrl: string; mailFrom: string }): void {
  if (!config.smtpUrl) return;
  const local: string[] = [];
  let publicHost = '';
  try {
    publicHost = new URL(config.publicUrl).hostname;
  } catch {
    // reported as an invalid PUBLIC_URL already
  }
  if (publicHost && isLocalHost(publicHost))
    local.push(`PUBLIC_URL (${config.publicUrl}${read.text('PUBLIC_URL') ? '' : ', the default'})`);
  const mailFrom = config.mailFrom;
  const mailDomain = /@([^\s@>]+)>?\s*$/.exec(mailFrom)?.[1] ?? '';
  if (isLocalHost(mailDomain)) local.push(`MAIL_FROM (${mailFrom}${read.text('MAIL_FROM') ? '' : ', the default'})`);
  if (local.length === 0) return;
  read.problem(
    `SMTP_URL is set, so email goes to real people, but ${local.join(' and ')} ${local.length > 1 ? 'point' : 'points'} at localhost or a loopback address: ` +
      'set PUBLIC_URL to the public https URL of this Hopper and MAIL_FROM to a mailbox of your domain (Name <mail@example.com>)',
  );
}

/** localhost, *.localhost, a loopback or unspecified address (127.0.0.0/8, ::1, 0.0.0.0, ::), or no host at all. */
function isLocalHost(host: string): boolean {
  const name = host
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
  if (name === '' || name === 'localhost' || name.endsWith('.localhost') || name === 'localhost.localdomain') return true;
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name) || name === '0.0.0.0') return true;
  return name === '::1' || name === '::' || /^(0{0,4}:){1,7}0{0,3}1$/.test(name) || name.startsWith('::ffff:127.');
}

function isDomain(value: string): boolean {
  return /^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/.test(value);
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:';
  } catch {
    return false;
  }
}
