import { HopperProblem } from '../../typescript/src/index.ts';

/** Where a command writes: the process's streams in `hopper`, others in tests. */
export interface Io {
  env: NodeJS.ProcessEnv;
  /** Where `--body-file -` and `--key -` read from. */
  stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
}

/** A failure the user can act on: printed as it is, exit code 1 (2 for a usage error). */
export class CliError extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** Rows as an aligned plain-text table, the header first; numbers are right-aligned. */
export function table(header: string[], rows: (string | number | null | undefined)[][]): string {
  const cells = [header, ...rows.map((row) => row.map((cell) => (cell === null || cell === undefined ? '' : String(cell))))];
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((row) => typeof row[i] === 'number'));
  const widths = header.map((_, i) => Math.max(...cells.map((row) => row[i]?.length ?? 0)));
  return cells
    .map((row) =>
      row
        .map((cell, i) => (numeric[i] ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
    .concat('\n');
}

/** What went wrong, in words: a problem's title, detail and field errors, or the error's message. */
export function describeError(error: unknown, server?: { url: string; from: string }): string {
  if (error instanceof HopperProblem) {
    const lines = [`${error.title} (${error.status}): ${error.message}`];
    for (const [field, reasons] of Object.entries(error.errors ?? {})) lines.push(`  ${field}: ${reasons.join('; ')}`);
    return lines.join('\n');
  }
  if (error instanceof CliError) return error.message;
  const cause = (error as { cause?: { message?: string; code?: string } })?.cause;
  const where = server ? `${server.url} (from ${server.from})` : 'the server';
  const unreachable = cause?.code ? UNREACHABLE[cause.code] : undefined;
  if (unreachable) return `Cannot reach ${where}: ${unreachable}`;
  const message = error instanceof Error ? error.message : String(error);
  return cause?.message ? `${message}: ${cause.message}` : message;
}

const UNTRUSTED =
  "its certificate is not one this machine trusts (a default install's own is self-signed): " +
  'hopper configure --ca /absolute/path/to/data/tls/cert.pem, or export NODE_EXTRA_CA_CERTS=/absolute/path/to/data/tls/cert.pem.';

/** Why a connection failed, and what to do about it, by the code of the failure. */
const UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: 'nothing answers there (connection refused). Is Hopper running, and is that its address and port?',
  ENOTFOUND: 'there is no host by that name. Check the URL.',
  EAI_AGAIN: 'its name could not be looked up just now (DNS). Check the network, or try again.',
  EHOSTUNREACH: 'no route to that host. Check the URL and the network.',
  ENETUNREACH: 'the network is unreachable.',
  ECONNRESET: 'the connection was dropped, again and again. Is that address an HTTPS server?',
  ERR_SSL_WRONG_VERSION_NUMBER: 'it does not speak HTTPS there: try http:// (or the HTTPS port).',
  DEPTH_ZERO_SELF_SIGNED_CERT: UNTRUSTED,
  SELF_SIGNED_CERT_IN_CHAIN: UNTRUSTED,
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: UNTRUSTED,
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: UNTRUSTED,
  CERT_HAS_EXPIRED: 'its certificate has expired.',
  ERR_TLS_CERT_ALTNAME_INVALID: 'its certificate is for another name than the one in the URL.',
};
