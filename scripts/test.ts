import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { glob, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { run } from 'node:test';
import { dropTestDatabases } from '../test/support/postgres-template.ts';
import { collect, type FileOutcome } from './test-lane.ts';

/**
 * `npm test`: every test file against a real database — PGlite by default, the PostgreSQL of
 * DATABASE_URL when it is set (each file makes its own database or schema and drops it). With
 * `--both` (CI), every file on PGlite and, in the same run, the database-dependent ones on the
 * PostgreSQL of DATABASE_URL.
 *
 * Each file runs in a process of its own; a file's report is printed whole when it ends, so that
 * files running side by side do not interleave. The longest files start first (their times are
 * in test/times.json, rewritten by `npm test -- --record-times`), so that the last minutes are
 * not one long file on one core. Test data lives on tmpfs when the machine has one
 * (test/support/tmpfs.ts).
 *
 * A test that needs a tool from outside npm (chromium, jq, promtool, spamassassin, Sisimai,
 * PostgreSQL's server binaries) is skipped where the tool is missing, saying which Debian package
 * to install (test/support/tools.ts); the run ends with one line per missing package and one
 * total. With TEST_REQUIRE_TOOLS=1 (CI) such a skip fails the run, so nothing is left out unseen.
 *
 * Arguments, if any, are the files or globs to run instead of all (`npm test -- test/contacts/*.test.ts`).
 */
const ALL = ['test/**/*.test.ts', 'clients/typescript/test/*.test.ts', 'clients/cli/test/*.test.ts'];

/**
 * Files that come out the same whichever database `npm test` is given: they open none, always run
 * Hopper on PGlite or on a PostgreSQL cluster of their own, or judge something the database has
 * no part in (the CLI, the typed client, an email's content and signature, the OpenAPI document,
 * the docs, TLS and HTTP hardening, addresses and URLs). `--both` runs them on PGlite only; the
 * database work their apps do is the same as other files' that run on both.
 */
const SAME_ON_EVERY_DATABASE = [
  // No database.
  'test/config.test.ts',
  'test/time.test.ts',
  'test/log.test.ts',
  'test/contacts/phone.test.ts',
  'test/db/count-cache.test.ts',
  'test/docs/architecture-checks.test.ts',
  'test/docs/typescript-blocks.test.ts',
  'test/email/compose-mime.test.ts',
  'test/email/email-html.test.ts',
  'test/email/tracking-render.test.ts',
  'test/inbound/classify.test.ts',
  'test/inbound/sisimai-judge.test.ts',
  'test/voicemail/drop-cowboy-events.test.ts',
  // Hopper on PGlite as `npm start` runs it, or on a PostgreSQL cluster the file starts.
  'test/main.test.ts',
  'test/docs/readme.test.ts',
  'test/security/graceful-stop.test.ts',
  'test/db/outage.test.ts',
  // The database is not what they judge: an email's content and signature, the OpenAPI document,
  // TLS, headers and the HTTP parser, the proxy's address, the URLs Hopper connects to, SES topics.
  'test/email/spamassassin.test.ts',
  'test/email/dkim.test.ts',
  'test/http/tls-and-proxy.test.ts',
  'test/http/hardening.test.ts',
  'test/security/proxy-address.test.ts',
  'test/security/outbound-urls.test.ts',
  'test/security/ses-topics.test.ts',
  'test/http/openapi.test.ts',
  'test/http/generated-client.test.ts',
  'clients/typescript/test/client.test.ts',
  'clients/typescript/test/package.test.ts',
  'clients/cli/test/cli.test.ts',
  'clients/cli/test/cli-send.test.ts',
  'clients/cli/test/cli-tls.test.ts',
];

/**
 * Pages in Debian's chromium (`*-browser.test.ts`) judge what the browser makes of the HTML —
 * forms without script, axe-core, 375 px, what a click does — and run on PGlite only; what each page
 * reads and writes is checked on both databases by the pages' HTTP tests (test/web/*.test.ts), and
 * a browser costs each file about 20 s of CPU.
 */
function sameOnEveryDatabase(file: string): boolean {
  return SAME_ON_EVERY_DATABASE.includes(file) || file.endsWith('-browser.test.ts');
}

/**
 * Files that judge a separate Hopper process by the clock from outside (answers within 2 s of a
 * database outage, SIGKILL trials, a shutdown within 10 s, a rate limit's minute; another user's
 * reads during a 20 MB import, in the file's own process): each runs with
 * at most half the run's other slots busy, so that neighbours' CPU use cannot make them fail.
 */
const CROWD_SHY = [
  'test/db/outage.test.ts',
  'test/sending/crash.test.ts',
  'test/main.test.ts',
  'test/webhooks/restart.test.ts',
  'test/http/rate-limit.test.ts',
  'test/security/graceful-stop.test.ts',
  'test/security/import-stall.test.ts',
];

/**
 * Files that run in a process of their own instead of in a lane (scripts/test-lane.ts): those that
 * judge a process by the clock (CROWD_SHY), and those that change what the whole process holds.
 */
const ISOLATED = [
  ...CROWD_SHY,
  // Hooks at the top of the file, which would run around every file of a lane.
  'test/http/hardening.test.ts',
  'test/docs/readme.test.ts',
  // Sets process.env for the Hopper it starts.
  'test/web/integrations-browser.test.ts',
];

const CONCURRENCY = Number(process.env.TEST_CONCURRENCY ?? Math.max(2, availableParallelism() + 1));
// A test that hangs fails after this long instead of holding the run until CI's own limit.
// A crowd-shy file holds half the slots.
const crowdShyWeight = Math.max(1, Math.ceil(CONCURRENCY / 2));
// About this many lanes a slot: a lane's process loads and warms the application once for all its
// files, and the smaller the lanes the better the last ones fill the slots as the run ends.
const LANES_PER_SLOT = Number(process.env.TEST_LANES_PER_SLOT ?? 8);
const TEST_TIMEOUT = Number(process.env.TEST_TIMEOUT_MS ?? 300_000);
const TIMES_FILE = 'test/times.json';
// V8's compile cache, shared by every test file's process and the Hopper processes they start:
// only the first compiles each module (about 0.6 s of CPU saved per process). Kept inside the
// checkout, so it goes with it instead of growing in the system's temporary directory.
const COMPILE_CACHE = resolve('node_modules/.cache/hopper-test-compile-cache');
const TOOL_SKIP = /^needs (\S+) \(Debian package (\S+)\)/;

type Database = 'PGlite' | 'PostgreSQL';

interface Task {
  file: string;
  database: Database;
  /** Its time in the last recorded run. */
  expectedMs: number;
}

interface FileResult extends FileOutcome {
  task: Task;
}

/**
 * V8 flags of every test process. A test process lives for seconds and runs much code a few times
 * each, and recompiling its hottest functions with V8's optimising compiler, TurboFan, costs more
 * than the faster code wins back before the process ends:
 *
 * - `--liftoff-only`: PGlite's WebAssembly (PostgreSQL) runs as the baseline compiler, Liftoff,
 *   makes it. 24 files of contacts, messages and webhooks on PGlite in lanes: 54.2 and 54.6 s of
 *   CPU with tier-up, 39.3 and 37.1 s without (−30 %). The Hopper and admin processes the tests
 *   start get it too (WASM_FLAGS, test/sending/support/hopper-process.ts): main.test.ts with its
 *   children 26.8 → 21.5 s. PostgreSQL runs no WebAssembly: nothing changes there.
 * - `--no-opt`: JavaScript stops at V8's middle tier, Maglev. 19 files of pages and sending at 3:
 *   62.9 and 54.8 s of CPU with TurboFan, 56.5 and 49.1 without (−10 %); the 24 above 40.6 → 37.4
 *   and 36.1; bounces, the fuzzer and imports, which compute the most, the same (23.7 → 23.3,
 *   25.6 → 25.2).
 *
 * Hopper itself (`npm start`) keeps V8's defaults, faster over a long run (a 20 MB import on PGlite:
 * 10.8 s of CPU with WebAssembly tier-up, 12.3 s without).
 */
const EXEC_ARGV = ['--liftoff-only', '--no-opt', '--import', './test/support/tmpfs.ts', '--import', './test/support/test-process.ts'];

function fileEnv(database: Database, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { DATABASE_URL, ...env } = process.env;
  return { ...env, ...(database === 'PostgreSQL' ? { DATABASE_URL } : {}), NODE_COMPILE_CACHE: COMPILE_CACHE, ...extra };
}

function heading(task: Task, label: boolean): string {
  return label ? `━━ ${task.file} on ${task.database}\n` : '';
}

function failure(task: Task, report: string): FileResult {
  return { task, ok: false, ms: 0, cpuMs: 0, tests: 1, passed: 0, failed: 1, skipped: [], report };
}

/** A file that runs alone, in a process of its own (ISOLATED). */
async function runAlone(task: Task, cpuDir: string, label: boolean): Promise<FileResult> {
  const started = performance.now();
  const cpuFile = join(cpuDir, `${task.database}-${task.file.replaceAll('/', '_')}.json`);
  const stream = run({
    files: [task.file],
    timeout: TEST_TIMEOUT,
    forceExit: true,
    execArgv: EXEC_ARGV,
    env: fileEnv(task.database, { TEST_CPU_USAGE_FILE: cpuFile }),
  });
  const outcome = await collect(stream, heading(task, label));
  const cpuMs = await readFile(cpuFile, 'utf8').then(
    (text) => JSON.parse(text).cpuMs as number,
    () => 0,
  );
  return { task, ...outcome, ms: performance.now() - started, cpuMs };
}

/**
 * A lane (scripts/test-lane.ts): one process running `tasks` one after another, each file's
 * outcome reported as it ends. What the lane's files print outside the reporter is added to the
 * report of a file that fails; a lane that dies fails the files it had not reported.
 */
function runLane(tasks: Task[], database: Database, label: boolean, report: (result: FileResult) => void): Promise<void> {
  const child = fork(
    'scripts/test-lane.ts',
    tasks.map((task) => task.file),
    {
      execArgv: EXEC_ARGV,
      env: fileEnv(database, { TEST_TIMEOUT_MS: String(TEST_TIMEOUT), TEST_LANE_LABEL: label ? database : '' }),
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    },
  );
  let printed = '';
  const keep = (chunk: Buffer) => {
    printed = (printed + String(chunk)).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const left = new Map(tasks.map((task) => [task.file, task]));
  child.on('message', (message: FileOutcome & { file: string }) => {
    const task = left.get(message.file);
    if (!task) return;
    left.delete(message.file);
    const { file: _, ...outcome } = message;
    report({ task, ...outcome, report: outcome.ok || !printed ? outcome.report : `${outcome.report}── printed meanwhile:\n${printed}\n` });
    printed = '';
  });
  return new Promise((done) => {
    child.on('exit', (code, signal) => {
      for (const task of left.values()) {
        report(
          failure(
            task,
            `${heading(task, label)}✖ its lane ended (${signal ?? `code ${code}`}) before it reported this file; it printed:\n${printed}\n`,
          ),
        );
      }
      done();
    });
  });
}

function alone(task: Task): boolean {
  return ISOLATED.includes(task.file) || process.env.TEST_ISOLATION === 'process';
}

/**
 * Runs the files longest first. A file that runs alone holds its weight of CONCURRENCY slots (half
 * of them for a crowd-shy one); the others go in lanes of one slot each, a lane taking the next
 * files of one database in order while their recorded times add up to at most a share of the whole
 * run's (LANES_PER_SLOT lanes a slot; one file at least, so a long file is a lane of its own).
 * When the next file does not fit (a crowd-shy file while others run), nothing else starts before
 * it: the running ones drain until it fits, so it cannot be left to the end.
 */
async function runAll(tasks: Task[], label: boolean): Promise<FileResult[]> {
  const queue = [...tasks].sort((a, b) => b.expectedMs - a.expectedMs);
  const cpuDir = await mkdtemp(join(tmpdir(), 'hopper-test-cpu-'));
  const results: FileResult[] = [];
  const report = (result: FileResult) => {
    process.stdout.write(result.report);
    results.push(result);
  };
  const laneMs = tasks.reduce((total, task) => total + task.expectedMs, 0) / (CONCURRENCY * LANES_PER_SLOT);
  const weight = (task: Task) => (CROWD_SHY.includes(task.file) ? crowdShyWeight : 1);
  const nextLane = (): Task[] => {
    const first = queue.shift() as Task;
    const lane = [first];
    let expected = first.expectedMs;
    for (let i = 0; i < queue.length; ) {
      const task = queue[i] as Task;
      if (task.database === first.database && !alone(task) && expected + task.expectedMs <= laneMs) {
        lane.push(task);
        expected += task.expectedMs;
        queue.splice(i, 1);
      } else {
        i++;
      }
    }
    return lane;
  };
  let used = 0;
  try {
    await new Promise<void>((done) => {
      const startFitting = () => {
        while (queue.length > 0 && used + weight(queue[0] as Task) <= CONCURRENCY) {
          const head = queue[0] as Task;
          const held = weight(head);
          used += held;
          const running = alone(head)
            ? runAlone(queue.shift() as Task, cpuDir, label).then(report)
            : runLane(nextLane(), head.database, label, report);
          void running.then(() => {
            used -= held;
            if (queue.length === 0 && used === 0) done();
            else startFitting();
          });
        }
      };
      startFitting();
    });
  } finally {
    await rm(cpuDir, { recursive: true, force: true });
  }
  return results;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function summarise(results: FileResult[], wallMs: number): boolean {
  const sum = (of: FileResult[], pick: (r: FileResult) => number) => of.reduce((total, r) => total + pick(r), 0);
  const lines = ['', '── slowest files (wall; CPU of the file and the processes it waited for)'];
  for (const r of [...results].sort((a, b) => b.ms - a.ms).slice(0, 15)) {
    lines.push(`  ${seconds(r.ms).padStart(8)} ${seconds(r.cpuMs).padStart(8)}  ${r.task.file} (${r.task.database})`);
  }
  const toolSkips = new Map<string, { tool: string; count: number }>();
  const otherSkips = new Map<string, number>();
  for (const reason of results.flatMap((r) => r.skipped)) {
    const tool = TOOL_SKIP.exec(reason);
    if (tool) {
      const entry = toolSkips.get(tool[2] as string) ?? { tool: tool[1] as string, count: 0 };
      entry.count++;
      toolSkips.set(tool[2] as string, entry);
    } else {
      otherSkips.set(reason, (otherSkips.get(reason) ?? 0) + 1);
    }
  }
  if (otherSkips.size > 0) lines.push('', '── skipped by design');
  for (const [reason, count] of otherSkips) lines.push(`  ${String(count).padStart(3)} × ${reason}`);
  if (toolSkips.size > 0) lines.push('', '── skipped: a tool is missing (install it to run them)');
  for (const [pkg, { tool, count }] of toolSkips) lines.push(`  ${String(count).padStart(3)} test(s) need ${tool}: apt-get install ${pkg}`);
  const failed = results.filter((r) => !r.ok);
  if (failed.length > 0) lines.push('', '── files with failures', ...failed.map((r) => `  ${r.task.file} (${r.task.database})`));
  lines.push('');
  for (const database of ['PGlite', 'PostgreSQL'] as const) {
    const of = results.filter((r) => r.task.database === database);
    if (of.length === 0) continue;
    lines.push(
      `── on ${database}: ${of.length} files, ${sum(of, (r) => r.tests)} tests, ${sum(of, (r) => r.passed)} passed, ` +
        `${sum(of, (r) => r.failed)} failed, ${sum(of, (r) => r.skipped.length)} skipped`,
    );
  }
  const toolSkipped = [...toolSkips.values()].reduce((total, s) => total + s.count, 0);
  lines.push(
    `── total: ${sum(results, (r) => r.tests)} tests, ${sum(results, (r) => r.failed)} failed, ` +
      `${sum(results, (r) => r.skipped.length)} skipped (${toolSkipped} for a missing tool); ` +
      `${seconds(wallMs)} wall, ${seconds(sum(results, (r) => r.cpuMs))} CPU, ${CONCURRENCY} at a time`,
  );
  let ok = failed.length === 0;
  if (toolSkipped > 0 && process.env.TEST_REQUIRE_TOOLS === '1') {
    lines.push('TEST_REQUIRE_TOOLS=1: a test was skipped for a missing tool; install it (see above).');
    ok = false;
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  return ok;
}

const args = process.argv.slice(2);
const recordTimes = args.includes('--record-times');
const both = args.includes('--both');
const asked = args.filter((a) => !a.startsWith('--'));
if (both && !process.env.DATABASE_URL) {
  console.error('npm test -- --both needs DATABASE_URL: the PostgreSQL database of the second pass');
  process.exit(2);
}
const gone = [...SAME_ON_EVERY_DATABASE, ...ISOLATED].filter((file) => !existsSync(file));
if (gone.length > 0) {
  console.error(`scripts/test.ts names files that do not exist: ${gone.join(', ')}`);
  process.exit(2);
}
const files = new Set<string>();
for (const pattern of asked.length > 0 ? asked : ALL) for await (const file of glob(pattern)) files.add(file);
if (files.size === 0) {
  console.error(`No test file matches ${asked.join(' ')}`);
  process.exit(2);
}

const times = await readFile(TIMES_FILE, 'utf8').then(
  (text) => JSON.parse(text) as Record<string, number>,
  () => ({}) as Record<string, number>,
);
const task = (file: string, database: Database): Task => ({
  file,
  database,
  // A file without a recorded time is taken for a long one (new tests tend to be).
  expectedMs: times[`${file} on ${database}`] ?? 60_000,
});
const tasks = [...files].flatMap((file) => {
  if (!both) return [task(file, process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite')];
  return sameOnEveryDatabase(file) ? [task(file, 'PGlite')] : [task(file, 'PGlite'), task(file, 'PostgreSQL')];
});

const started = performance.now();
const results = await runAll(tasks, both);
// The databases the files' test apps made on PostgreSQL, and their template (test/support/postgres-template.ts).
if (process.env.DATABASE_URL) await dropTestDatabases(process.env.DATABASE_URL);
const ok = summarise(results, performance.now() - started);
// Every file's times, for a closer look than the table's (artifacts/ is ignored by git).
const byFile = results.map(({ task: { file, database }, ms, cpuMs, tests, failed }) => ({
  file,
  database,
  ms: Math.round(ms),
  cpuMs,
  tests,
  failed,
}));
await mkdir('artifacts', { recursive: true });
await writeFile(`artifacts/test-times${asked.length > 0 ? '-some' : ''}.json`, `${JSON.stringify(byFile, null, 1)}\n`);
if (recordTimes) {
  const recorded = { ...times };
  for (const r of byFile) recorded[`${r.file} on ${r.database}`] = r.ms;
  const sorted = Object.fromEntries(Object.entries(recorded).sort(([a], [b]) => a.localeCompare(b)));
  await writeFile(TIMES_FILE, `${JSON.stringify(sorted, null, 2)}\n`);
}
process.exitCode = ok ? 0 : 1;
