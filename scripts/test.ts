import { glob } from 'node:fs/promises';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';

/**
 * `npm test`: every test file against a real database — PGlite by default, the PostgreSQL of
 * DATABASE_URL when it is set (each file makes its own database or schema and drops it).
 *
 * Files run in separate processes, two at a time, except those that start Hopper as processes of
 * its own and judge it by the clock from outside (answers within 2 s of a database outage, SIGKILL
 * trials, a shutdown within 10 s): they run afterwards, one at a time, so that a neighbouring
 * file's CPU use cannot make them fail. Test data lives on tmpfs when the machine has one
 * (test/support/tmpfs.ts).
 *
 * Arguments, if any, are the files or globs to run instead of all (`npm test -- test/contacts/*.test.ts`).
 */
const ALL = ['test/**/*.test.ts', 'clients/typescript/test/*.test.ts', 'clients/cli/test/*.test.ts'];
const ALONE = [
  'test/db/outage.test.ts',
  'test/sending/crash.test.ts',
  'test/main.test.ts',
  'test/webhooks/restart.test.ts',
  'test/http/rate-limit.test.ts',
  'test/security/graceful-stop.test.ts',
];
const CONCURRENCY = Number(process.env.TEST_CONCURRENCY ?? 2);
// A test that hangs fails after this long instead of holding the run until CI's own limit (the
// longest test, a worker restart with webhook retries, takes about 70 s).
const TEST_TIMEOUT = Number(process.env.TEST_TIMEOUT_MS ?? 300_000);

function runFiles(options: { globPatterns?: string[]; files?: string[]; concurrency: number }): Promise<boolean> {
  return new Promise((resolve) => {
    let failed = false;
    const stream = run({ ...options, timeout: TEST_TIMEOUT, forceExit: true, execArgv: ['--import', './test/support/tmpfs.ts'] });
    stream.on('test:fail', () => {
      failed = true;
    });
    const report = stream.compose(spec);
    report.on('end', () => resolve(!failed));
    report.pipe(process.stdout, { end: false });
  });
}

const asked = process.argv.slice(2);
let ok: boolean;
if (asked.length > 0) {
  ok = await runFiles({ globPatterns: asked, concurrency: CONCURRENCY });
} else {
  const alone = new Set(ALONE);
  const files: string[] = [];
  for (const pattern of ALL) for await (const file of glob(pattern)) if (!alone.has(file)) files.push(file);
  ok = await runFiles({ files: files.sort(), concurrency: CONCURRENCY });
  ok = (await runFiles({ files: ALONE, concurrency: 1 })) && ok;
}
process.exitCode = ok ? 0 : 1;
