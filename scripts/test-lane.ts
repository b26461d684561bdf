import { readFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';

/**
 * A lane of `npm test` (scripts/test.ts): one process that runs its share of the test files one
 * after another, in itself (`isolation: 'none'`). The application's modules are loaded and
 * compiled once a lane instead of once a file, and V8 has warmed them by the second file: a test
 * app starts on about half the CPU in a warm process. Every file still gets a database of its own
 * (test/support/test-app.ts); what lives in the process is shared, which is why the files that
 * judge a process from outside or change what it holds run alone (scripts/test.ts, ISOLATED).
 *
 * Files are given as arguments; each file's outcome goes to the parent (IPC) as soon as the next
 * file starts. The lane's last file is test/support/lane-end.ts, whose one test waits until
 * the outcome of the file before it has been sent: the runner ends the process (forceExit: a file
 * that leaves a timer or a socket behind cannot hold the lane) only after that.
 */
export interface FileOutcome {
  ok: boolean;
  ms: number;
  cpuMs: number;
  tests: number;
  passed: number;
  failed: number;
  skipped: string[];
  report: string;
}

export const LANE_END = 'test/support/lane-end.ts';
const LANE_FLUSHED = Symbol.for('hopper.test-lane.flushed');

type TestEvent = { type: string; data: Record<string, unknown> & { file?: string; nesting?: number } };

/** Counts a file's tests from its events and renders its report with the spec reporter, without its own summary. */
export async function collect(
  events: AsyncIterable<TestEvent> | Iterable<TestEvent>,
  heading: string,
): Promise<Omit<FileOutcome, 'ms' | 'cpuMs'>> {
  const outcome = { ok: true, tests: 0, passed: 0, failed: 0, skipped: [] as string[], report: '' };
  const seen: TestEvent[] = [];
  for await (const event of events) {
    seen.push(event);
    const data = event.data as { skip?: boolean | string; details?: { type?: string } };
    if (event.type === 'test:pass') {
      // A skipped suite counts as one skipped test: its tests never run, so never report.
      if (data.skip !== undefined && data.skip !== false) outcome.skipped.push(typeof data.skip === 'string' ? data.skip : 'skipped');
      if (data.details?.type === 'suite') continue;
      outcome.tests++;
      if (!data.skip) outcome.passed++;
    } else if (event.type === 'test:fail') {
      outcome.ok = false;
      if (data.details?.type !== 'suite') {
        outcome.tests++;
        outcome.failed++;
      }
    }
  }
  const chunks: string[] = heading ? [heading] : [];
  for await (const chunk of Readable.from(seen).compose(spec)) chunks.push(String(chunk));
  // Each file's own summary (ℹ tests 12 …) is left out: the run ends with one for all files.
  outcome.report = chunks.join('').replace(/^ℹ (?:tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) .*\n/gm, '');
  return outcome;
}

/** CPU time of this process and of the children it has waited for, in ms (Linux: /proc). */
export function processTreeCpuMs(): number {
  try {
    // Fields after "(comm) ": [11] utime, [12] stime, [13] cutime, [14] cstime, in ticks of 10 ms.
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]?.split(' ') ?? [];
    return [11, 12, 13, 14].reduce((total, i) => total + Number(fields[i]) * 10, 0);
  } catch {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  }
}

async function runLane(files: string[], timeout: number, label: string): Promise<void> {
  let flushed: () => void = () => {};
  (globalThis as Record<symbol, unknown>)[LANE_FLUSHED] = new Promise<void>((done) => {
    flushed = done;
  });
  const send = (message: unknown) => new Promise<void>((done) => process.send?.(message, () => done()));
  const end = resolve(LANE_END);
  let current: { file: string; events: TestEvent[]; started: number; cpu: number } | undefined;
  const finish = async () => {
    if (!current) return;
    const { file, events, started, cpu } = current;
    current = undefined;
    const outcome = await collect(events, label ? `━━ ${file} on ${label}\n` : '');
    await send({ file, ...outcome, ms: performance.now() - started, cpuMs: processTreeCpuMs() - cpu });
  };
  const stream = run({ files: [...files, LANE_END], isolation: 'none', forceExit: true, timeout });
  for await (const event of stream as AsyncIterable<TestEvent>) {
    // Declarations while the files load; the runner's own totals.
    if (event.type === 'test:enqueue' || event.type === 'test:summary' || (event.type === 'test:plan' && event.data.nesting === 0))
      continue;
    const path = event.data.file;
    if (event.type === 'test:dequeue' && event.data.nesting === 0 && path && path !== resolve(current?.file ?? '')) {
      await finish();
      if (path === end) {
        flushed();
        continue;
      }
      current = { file: relative(process.cwd(), path), events: [], started: performance.now(), cpu: processTreeCpuMs() };
    }
    if (path !== end) current?.events.push(event);
  }
  await finish();
}

if (process.send) {
  await runLane(process.argv.slice(2), Number(process.env.TEST_TIMEOUT_MS ?? 300_000), process.env.TEST_LANE_LABEL ?? '');
}
