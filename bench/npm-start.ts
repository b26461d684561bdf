import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * How `npm start` runs Hopper, read from package.json's `start` script (`VAR=value exec node
 * <flags> src/main.ts`), so that the benches measure the service with the same Node flags and
 * environment (docs/performance.md, "Memory"). With BENCH_V8_DEFAULTS=1, neither: Node's own
 * defaults, to measure what the start script's memory settings cost in throughput.
 */
export function npmStart(): { env: Record<string, string>; args: string[] } {
  if (process.env.BENCH_V8_DEFAULTS === '1') return { env: {}, args: [] };
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '..', 'package.json'), 'utf8')) as { scripts: { start: string } };
  const match = /^((?:\w+=\S+\s+)*)exec node\s+(.*?)\s*src\/main\.ts$/.exec(pkg.scripts.start.trim());
  if (!match) throw new Error(`package.json's start script is not "VAR=value exec node <flags> src/main.ts": ${pkg.scripts.start}`);
  const env = Object.fromEntries(
    (match[1] ?? '')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map((pair) => pair.split('=', 2) as [string, string]),
  );
  return { env, args: (match[2] ?? '').split(/\s+/).filter(Boolean) };
}
