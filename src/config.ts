import { resolve } from 'node:path';
import { parseApiKey } from './identity/api-key-format.ts';

export const ROLES = ['all', 'api', 'worker'] as const;
export type ProcessRole = (typeof ROLES)[number];

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  /** PostgreSQL schema holding Hopper's tables (lets tests and several instances share a database). */
  readonly databaseSchema: string;
  readonly publicUrl: string;
  readonly tlsCertFile: string | undefined;
  readonly tlsKeyFile: string | undefined;
  readonly trustProxy: boolean;
  readonly bootstrapAdminKey: string | undefined;
  readonly gracePeriodMs: number;
  readonly smtpUrl: string | undefined;
  readonly mailFrom: string;
  readonly role: ProcessRole;
  readonly logLevel: string;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const DURATION_UNITS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Parses `30s`, `15m`, `2h`, `14d` into milliseconds; returns undefined for anything else. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d{1,6})([smhd])$/.exec(text.trim());
  if (!match) return undefined;
  return Number(match[1]) * DURATION_UNITS[match[2] as keyof typeof DURATION_UNITS];
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Reads the environment once. Every problem is collected so the operator fixes them in one go;
 * each message names the variable and the form it accepts.
 */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const text = (name: string): string | undefined => {
    const value = env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };

  const port = integer('PORT', text('PORT') ?? '8443', 0, 65_535);
  const host = text('HOST') ?? '127.0.0.1';
  const dataDir = resolve(text('DATA_DIR') ?? './data');

  const databaseUrl = text('DATABASE_URL');
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push('DATABASE_URL must be a postgres:// or postgresql:// URL');
  }
  const databaseSchema = text('DATABASE_SCHEMA') ?? 'public';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(databaseSchema)) {
    problems.push('DATABASE_SCHEMA must be a lower-case SQL identifier (letters, digits, _)');
  }

  const trustProxy = boolean('TRUST_PROXY', text('TRUST_PROXY') ?? 'false');
  const publicUrl = (text('PUBLIC_URL') ?? `https://localhost:${port}`).replace(/\/+$/, '');
  if (!isHttpUrl(publicUrl)) problems.push('PUBLIC_URL must be an absolute http(s) URL such as https://hopper.example.com');

  const tlsCertFile = text('TLS_CERT_FILE');
  const tlsKeyFile = text('TLS_KEY_FILE');
  if (Boolean(tlsCertFile) !== Boolean(tlsKeyFile)) {
    problems.push('TLS_CERT_FILE and TLS_KEY_FILE must be set together (PEM files)');
  }

  const bootstrapAdminKey = text('BOOTSTRAP_ADMIN_KEY');
  if (bootstrapAdminKey && !parseApiKey(bootstrapAdminKey)) {
    problems.push('BOOTSTRAP_ADMIN_KEY must be a Hopper API key: hop_ + 40 base62 characters + 6-character checksum');
  }

  const graceText = text('GRACE_PERIOD') ?? '14d';
  const gracePeriodMs = parseDuration(graceText);
  if (gracePeriodMs === undefined) problems.push(`GRACE_PERIOD must look like 30s, 15m, 2h or 14d (got "${graceText}")`);

  const smtpUrl = text('SMTP_URL');
  if (smtpUrl && !/^smtps?:\/\//.test(smtpUrl)) problems.push('SMTP_URL must be an smtp:// or smtps:// URL');
  const mailFrom = text('MAIL_FROM') ?? 'Hopper <no-reply@localhost>';

  const roleText = text('ROLE') ?? 'all';
  const role = ROLES.find((r) => r === roleText);
  if (!role) problems.push(`ROLE must be one of ${ROLES.join(', ')} (got "${roleText}")`);
  else if (role !== 'all' && !databaseUrl) {
    problems.push(`ROLE=${role} needs DATABASE_URL: the embedded PGlite database allows one process only`);
  }

  const logLevel = text('LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    problems.push('LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent');
  }

  if (problems.length > 0) {
    throw new ConfigError(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }

  return Object.freeze({
    port,
    host,
    dataDir,
    databaseUrl,
    databaseSchema,
    publicUrl,
    tlsCertFile,
    tlsKeyFile,
    trustProxy,
    bootstrapAdminKey,
    gracePeriodMs: gracePeriodMs as number,
    smtpUrl,
    mailFrom,
    role: role as ProcessRole,
    logLevel,
  });

  function integer(name: string, value: string, min: number, max: number): number {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < min || n > max) {
      problems.push(`${name} must be an integer from ${min} to ${max} (got "${value}")`);
    }
    return n;
  }

  function boolean(name: string, value: string): boolean {
    if (/^(true|1|yes)$/i.test(value)) return true;
    if (/^(false|0|no)$/i.test(value)) return false;
    problems.push(`${name} must be true or false (got "${value}")`);
    return false;
  }
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:';
  } catch {
    return false;
  }
}
