import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * How `npm start` runs Hopper, read from package.json's `start` script (`VAR=value exec node
 * <flags> src/main.ts`), so that the benches measure the service with the same Node flags and
 * environment (docs/performance.md, "Memory"). With BENCH_V8_DEFAULTS=1, neither: Node's own
 * defaults, to measure what the start script's memory settings cost in throughput. With `without`
 * (a flag such as `--max-semi-space-size` or `--import`, or a variable the script sets), all but that
 * one: what each setting costs and saves (bench/send.ts, BENCH_RUNS=flags).
 */
export function npmStart(without?: string): { env: Record<string, string>; args: string[] } {
  if (process.env.BENCH_V8_DEFAULTS === '1') return { env: {}, args: [] };
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '..', 'package.json'), 'utf8')) as { scripts: { start: string } };
  const match = /^((?:\w+=\S+\s+)*)exec node\s+(.*?)\s*src\/main\.ts$/.exec(pkg.scripts.start.trim());
  if (!match) throw new Error(`package.json's start script is not "VAR=value exec node <flags> src/main.ts": ${pkg.scripts.start}`);
  const env = Object.fromEntries(
    (match[1] ?? '')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map((pair) => pair.split('=', 2) as [string, string])
      .filter(([name]) => name !== without),
  );
  const args = (match[2] ?? '')
    .split(/\s+/)
    .filter(Boolean)
    .filter((arg) => arg.split('=')[0] !== without);
  return { env, args };
}

/** The names of the start script's settings: its variables, then its Node flags (`--max-semi-space-size`). */
export function npmStartSettings(): string[] {
  const { env, args } = npmStart();
  return [...Object.keys(env), ...args.map((arg) => arg.split('=')[0] as string)];
}
