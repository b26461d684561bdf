import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { waitFor } from './wait.ts';

export { freePort } from '../../support/free-port.ts';

/**
 * `node src/main.ts` as a child process (the Node running the tests, so Node 24), with its own
 * environment only: nothing of the test process's DATABASE_URL leaks in unless passed.
 */
const MAIN = join(import.meta.dirname, '..', '..', '..', 'src', 'main.ts');

export interface HopperProcess {
  readonly child: ChildProcess;
  /** Everything it printed so far (JSON log lines and the like). */
  output(): string;
  readonly exited: Promise<number | null>;
  /** Resolves once the sending engine has started (its log line). */
  ready(timeoutMs?: number): Promise<void>;
  /** The log lines (parsed) whose `msg` is `message`. */
  logs(message: string): Record<string, unknown>[];
}

/**
 * V8's WebAssembly flags of this test process (`--liftoff-only`, scripts/test.ts), for the Node
 * processes it starts: a Hopper or a tool of Hopper's on PGlite then runs its WebAssembly the same way.
 */
export const WASM_FLAGS: readonly string[] = process.execArgv.filter((flag) => flag === '--liftoff-only');

export function startHopper(env: Record<string, string>): HopperProcess {
  const { DATABASE_URL: _url, DATABASE_SCHEMA: _schema, ...inherited } = process.env;
  const child = spawn(process.execPath, [...WASM_FLAGS, MAIN], { env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  let code: number | null | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (exitCode) => {
      code = exitCode;
      resolve(exitCode);
    }),
  );
  return {
    child,
    output: () => output,
    exited,
    async ready(timeoutMs = 30_000) {
      await waitFor(
        'the worker to start',
        () => {
          if (code !== undefined) throw new Error(`it exited (${code}):\n${output}`);
          return output.includes('sending engine started');
        },
        { timeoutMs },
      );
    },
    logs(message) {
      const entries: Record<string, unknown>[] = [];
      for (const line of output.split('\n')) {
        if (!line.startsWith('{') || !line.endsWith('}')) continue;
        const entry = JSON.parse(line) as Record<string, unknown>;
        if (entry.msg === message) entries.push(entry);
      }
      return entries;
    },
  };
}

/** Waits until the API of the Hopper at `base` (behind a TLS-terminating proxy) reads the templated email as Sent. */
export async function untilSentThroughApi(
  base: string,
  key: string,
  messageId: number,
  options: { timeoutMs: number; intervalMs?: number },
): Promise<void> {
  await waitFor(
    'the message to be Sent',
    async () => {
      const reply = await fetch(`${base}/v3/templated_emails/${messageId}`, {
        headers: { authorization: `Bearer ${key}`, 'x-forwarded-proto': 'https' },
      });
      return reply.ok && ((await reply.json()) as { status: string }).status === 'Sent';
    },
    options,
  );
}

/** Kills the process with `signal` and waits until it is gone. */
export async function stopHopper(process: HopperProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (process.child.exitCode === null && process.child.signalCode === null) process.child.kill(signal);
  return process.exited;
}
