import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

/**
 * Loaded by `npm test` into each test file's process (`--import`). At exit:
 * - any process it started and left running (a Hopper started with `node src/main.ts` whose test
 *   failed before stopping it, a redis-server) is killed, with its own children, so that a failed
 *   file leaves nothing behind to slow the files after it;
 * - the CPU time the file used — its own and that of the processes it started and waited for —
 *   is written to TEST_CPU_USAGE_FILE, for the runner's table of the slowest files.
 */
function stat(pid: number | 'self'): string[] {
  // Fields after "(comm) ": [0] state, [1] ppid, …, [11] utime, [12] stime, [13] cutime, [14] cstime.
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
}

function descendants(root: number): number[] {
  const parents = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    try {
      const ppid = Number(stat(pid)[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), pid]);
    } catch {
      // Gone meanwhile.
    }
  }
  const found: number[] = [];
  const walk = (pid: number) => {
    for (const child of parents.get(pid) ?? []) {
      found.push(child);
      walk(child);
    }
  };
  walk(root);
  return found;
}

process.on('exit', () => {
  const target = process.env.TEST_CPU_USAGE_FILE;
  try {
    if (target) {
      const fields = stat('self');
      // Clock ticks, 100 a second on Linux.
      writeFileSync(target, JSON.stringify({ cpuMs: [11, 12, 13, 14].reduce((total, i) => total + Number(fields[i]) * 10, 0) }));
    }
    for (const pid of descendants(process.pid)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  } catch {
    // No /proc (not Linux): nothing to record or reap.
  }
});
