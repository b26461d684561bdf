import { existsSync } from 'node:fs';
import { glob, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';

/**
 * `npm test`: every test file against a real database — PGlite by default, the PostgreSQL of
 * DATABASE_URL when it is set (each file makes its own database or schema and drops it).
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
 * Arguments, if any, are the files or globs to run instead of all (`npm test -- test/contacts/*.test.ts`);
 * `--record-times` rewrites test/times.json, `--database-dependent` leaves out the files that come
 * out the same on every database (below).
 */
const ALL = ['test/**/*.test.ts', 'clients/typescript/test/*.test.ts', 'clients/cli/test/*.test.ts'];
/**
 * Files that come out the same whichever database `npm test` is given: they open none, always run
 * Hopper on PGlite or on a PostgreSQL cluster of their own, or judge something the database has
 * no part in (the CLI, the typed client, an email's content, the OpenAPI document and the docs).
 * `--database-dependent` leaves them out: CI's PostgreSQL pass, as its PGlite pass runs them.
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
  // The database is not what they judge.
  'test/email/spamassassin.test.ts',
  'test/web/docs-browser.test.ts',
  'test/http/openapi.test.ts',
  'test/http/generated-client.test.ts',
  'clients/typescript/test/client.test.ts',
  'clients/typescript/test/package.test.ts',
  'clients/cli/test/cli.test.ts',
  'clients/cli/test/cli-send.test.ts',
  'clients/cli/test/cli-tls.test.ts',
];
const CONCURRENCY = Number(process.env.TEST_CONCURRENCY ?? Math.max(2, availableParallelism() + 1));
// A test that hangs fails after this long instead of holding the run until CI's own limit.
const TEST_TIMEOUT = Number(process.env.TEST_TIMEOUT_MS ?? 300_000);
const TIMES_FILE = 'test/times.json';
// V8's compile cache, shared by every test file's process and the Hopper processes they start:
// only the first compiles each module (about 0.6 s of CPU saved per process). Kept inside the
// checkout, so it goes with it instead of growing in the system's temporary directory.
const COMPILE_CACHE = resolve('node_modules/.cache/hopper-test-compile-cache');
const TOOL_SKIP = /^needs (\S+) \(Debian package (\S+)\)/;

interface FileResult {
  file: string;
  ok: boolean;
  ms: number;
  cpuMs: number;
  tests: number;
  passed: number;
  failed: number;
  skipped: string[];
  report: string;
}

async function runFile(file: string, cpuDir: string): Promise<FileResult> {
  const started = performance.now();
  const result: FileResult = { file, ok: true, ms: 0, cpuMs: 0, tests: 0, passed: 0, failed: 0, skipped: [], report: '' };
  const cpuFile = join(cpuDir, `${file.replaceAll('/', '_')}.json`);
  const stream = run({
    files: [file],
    timeout: TEST_TIMEOUT,
    forceExit: true,
    execArgv: ['--import', './test/support/tmpfs.ts', '--import', './test/support/test-process.ts'],
    env: { ...process.env, TEST_CPU_USAGE_FILE: cpuFile, NODE_COMPILE_CACHE: COMPILE_CACHE },
  });
  stream.on('test:pass', (event) => {
    // A skipped suite counts as one skipped test: its tests never run, so never report.
    if (event.skip !== undefined && event.skip !== false) result.skipped.push(typeof event.skip === 'string' ? event.skip : 'skipped');
    if (event.details.type === 'suite') return;
    result.tests++;
    if (!event.skip) result.passed++;
  });
  stream.on('test:fail', (event) => {
    result.ok = false;
    if (event.details.type !== 'suite') {
      result.tests++;
      result.failed++;
    }
  });
  const chunks: string[] = [];
  const report = stream.compose(spec);
  for await (const chunk of report) chunks.push(String(chunk));
  // Each file's own summary (ℹ tests 12 …) is left out: the run ends with one for all files.
  result.report = chunks.join('').replace(/^ℹ (?:tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) .*\n/gm, '');
  result.ms = performance.now() - started;
  result.cpuMs = await readFile(cpuFile, 'utf8').then(
    (text) => JSON.parse(text).cpuMs as number,
    () => 0,
  );
  return result;
}

async function previousTimes(): Promise<Record<string, number>> {
  return readFile(TIMES_FILE, 'utf8').then(
    (text) => JSON.parse(text) as Record<string, number>,
    () => ({}),
  );
}

async function runAll(files: string[]): Promise<FileResult[]> {
  const times = await previousTimes();
  // Longest first; a file without a recorded time is assumed long (new tests tend to be).
  const queue = [...files].sort((a, b) => (times[b] ?? 60_000) - (times[a] ?? 60_000));
  const cpuDir = await mkdtemp(join(tmpdir(), 'hopper-test-cpu-'));
  const results: FileResult[] = [];
  async function lane(): Promise<void> {
    for (let file = queue.shift(); file; file = queue.shift()) {
      const result = await runFile(file, cpuDir);
      process.stdout.write(result.report);
      results.push(result);
    }
  }
  try {
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, files.length) }, lane));
  } finally {
    await rm(cpuDir, { recursive: true, force: true });
  }
  return results;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function summarise(results: FileResult[], wallMs: number): boolean {
  const sum = (pick: (r: FileResult) => number) => results.reduce((total, r) => total + pick(r), 0);
  const lines = ['', '── slowest files (wall, CPU of the file and the processes it waited for)'];
  for (const r of [...results].sort((a, b) => b.ms - a.ms).slice(0, 15)) {
    lines.push(`  ${seconds(r.ms).padStart(8)} ${seconds(r.cpuMs).padStart(8)}  ${r.file}`);
  }
  const toolSkips = new Map<string, { tool: string; count: number }>();
  const otherSkips = new Map<string, number>();
  for (const r of results) {
    for (const reason of r.skipped) {
      const tool = TOOL_SKIP.exec(reason);
      if (tool) {
        const entry = toolSkips.get(tool[2] as string) ?? { tool: tool[1] as string, count: 0 };
        entry.count++;
        toolSkips.set(tool[2] as string, entry);
      } else {
        otherSkips.set(reason, (otherSkips.get(reason) ?? 0) + 1);
      }
    }
  }
  if (otherSkips.size > 0) lines.push('', '── skipped by design');
  for (const [reason, count] of otherSkips) lines.push(`  ${String(count).padStart(3)} × ${reason}`);
  if (toolSkips.size > 0) lines.push('', '── skipped: a tool is missing (install it to run them)');
  for (const [pkg, { tool, count }] of toolSkips) {
    lines.push(`  ${String(count).padStart(3)} test(s) need ${tool}: apt-get install ${pkg}`);
  }
  const failedFiles = results.filter((r) => !r.ok);
  if (failedFiles.length > 0) lines.push('', '── files with failures', ...failedFiles.map((r) => `  ${r.file}`));
  const database = process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite';
  const skippedCount = sum((r) => r.skipped.length);
  lines.push(
    '',
    `── total on ${database}: ${results.length} files, ${sum((r) => r.tests)} tests, ${sum((r) => r.passed)} passed, ` +
      `${sum((r) => r.failed)} failed, ${skippedCount} skipped (${[...toolSkips.values()].reduce((t, s) => t + s.count, 0)} for a missing tool); ` +
      `${seconds(wallMs)} wall, ${seconds(sum((r) => r.cpuMs))} CPU, ${CONCURRENCY} at a time`,
  );
  let ok = failedFiles.length === 0;
  if (toolSkips.size > 0 && process.env.TEST_REQUIRE_TOOLS === '1') {
    lines.push('TEST_REQUIRE_TOOLS=1: a test was skipped for a missing tool; install it (see above).');
    ok = false;
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  return ok;
}

const args = process.argv.slice(2);
const recordTimes = args.includes('--record-times');
const databaseDependent = args.includes('--database-dependent');
const asked = args.filter((a) => !a.startsWith('--'));
const files: string[] = [];
for (const pattern of asked.length > 0 ? asked : ALL) {
  for await (const file of glob(pattern)) if (!(databaseDependent && SAME_ON_EVERY_DATABASE.includes(file))) files.push(file);
}
const gone = asked.length === 0 ? SAME_ON_EVERY_DATABASE.filter((file) => !existsSync(file)) : [];
if (gone.length > 0) {
  console.error(`scripts/test.ts lists files that do not exist: ${gone.join(', ')}`);
  process.exit(1);
}
if (files.length === 0) {
  console.error(`No test file matches ${asked.join(' ')}`);
  process.exit(1);
}
const started = performance.now();
const results = await runAll([...new Set(files)].sort());
const ok = summarise(results, performance.now() - started);
// Every file's times, for a closer look than the table's (artifacts/ is ignored by git).
const byFile = results.map(({ file, ms, cpuMs, tests, failed }) => ({ file, ms: Math.round(ms), cpuMs, tests, failed }));
await mkdir('artifacts', { recursive: true });
const database = process.env.DATABASE_URL ? 'postgres' : 'pglite';
await writeFile(`artifacts/test-times-${database}${asked.length > 0 ? '-some' : ''}.json`, `${JSON.stringify(byFile, null, 1)}\n`);
if (recordTimes) {
  const times = Object.fromEntries(byFile.map((r) => [r.file, r.ms]).sort((a, b) => String(a[0]).localeCompare(String(b[0]))));
  await writeFile(TIMES_FILE, `${JSON.stringify(times, null, 2)}\n`);
}
process.exitCode = ok ? 0 : 1;
