import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { get as httpsGet } from 'node:https';
import { join } from 'node:path';
import { npmStart } from './npm-start.ts';

export { freePort } from '../test/support/free-port.ts';

/**
 * What bench/send.ts and bench/soak.ts share: Hopper started as `npm start` runs it, its memory
 * read from /metrics and /proc, a free port.
 */
const MAIN = join(import.meta.dirname, '..', 'src', 'main.ts');

export const METRICS_TOKEN = 'bench-metrics-token-0123456789';

export interface Worker {
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<void>;
}

/** Hopper (`node src/main.ts`) with `npm start`'s Node flags and environment plus `env`; ready once its sending engine has started. */
export function startWorker(env: Record<string, string>, index: number, without?: string): Worker {
  // As `npm start` runs it: its Node flags and environment (package.json) but `without`, then any of the bench's own.
  const start = npmStart(without);
  const args = [...start.args, ...(process.env.BENCH_WORKER_FLAGS ?? '').split(' ').filter(Boolean)];
  const child = spawn(process.execPath, [...args, MAIN], {
    env: { ...process.env, ...start.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const ready = new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk;
      if (output.includes('sending engine started')) {
        child.stdout?.off('data', onData);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`worker ${index} exited (${code}) before it started:\n${output}`)));
  });
  child.stderr?.on('data', (chunk: Buffer) => process.stderr.write(`[worker ${index}] ${chunk}`));
  if (process.env.BENCH_VERBOSE) child.stdout?.on('data', (chunk: Buffer) => process.stdout.write(`[worker ${index}] ${chunk}`));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, ready, exited };
}

/** The text of a ROLE=all process's /metrics (HTTPS, its self-signed certificate, METRICS_TOKEN). */
export function readMetrics(port: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    httpsGet(
      `https://127.0.0.1:${port}/metrics`,
      { rejectUnauthorized: false, headers: { authorization: `Bearer ${METRICS_TOKEN}` } },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => {
          text += chunk;
        });
        res.on('end', () => resolve(text));
      },
    ).on('error', reject);
  });
}

/** A sample's value in MB: `name` is a metric, or a metric with its labels (`…{space="new"}`). */
export function metricMb(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || (!name.includes('{') && l.startsWith(`${name}{`)));
  return Number(line?.split(' ').pop() ?? 0) / 2 ** 20;
}

/**
 * Samples the ROLE=all process's memory from its /metrics every second (resident, V8 heap used and
 * committed, external, array buffers); the returned function stops and describes the sample with
 * the highest RSS: where the high-water mark sits. Not more often: each scrape also runs the
 * database's metrics (counts over the deliveries), work the measured send would pay for.
 */
export function memorySampler(port: string): () => Promise<string> {
  let top: Record<string, number> = { rss: 0 };
  let running = true;
  const loop = (async () => {
    while (running) {
      const text = await readMetrics(port).catch(() => '');
      const sample = {
        rss: metricMb(text, 'hopper_process_resident_memory_bytes'),
        heapUsed: metricMb(text, 'hopper_nodejs_heap_size_used_bytes'),
        heapTotal: metricMb(text, 'hopper_nodejs_heap_size_total_bytes'),
        external: metricMb(text, 'hopper_nodejs_external_memory_bytes'),
        newSpace: metricMb(text, 'hopper_nodejs_heap_space_size_total_bytes{space="new"}'),
      };
      if (sample.rss > (top.rss ?? 0)) top = sample;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  })();
  return async () => {
    running = false;
    await loop;
    return Object.entries(top)
      .map(([name, mb]) => `${name} ${mb.toFixed(0)} MB`)
      .join(', ');
  };
}

/** A process's peak resident memory so far (VmHWM), in MB. */
export async function peakRssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1] ?? 0);
  return kb / 1024;
}
