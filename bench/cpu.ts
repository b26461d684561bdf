import { readdir, readFile } from 'node:fs/promises';

/** CPU seconds a process has used (user + system), from /proc; 0 once it is gone. */
export async function cpuSeconds(pid: number): Promise<number> {
  try {
    const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).replace(/^.*\) /, '').split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** CPU seconds of every PostgreSQL process on this machine, by pid (one that ends in between is left out). */
async function postgresCpuSeconds(): Promise<Map<number, number>> {
  const seconds = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if ((await readFile(`/proc/${entry}/comm`, 'utf8')).trim() === 'postgres')
        seconds.set(Number(entry), await cpuSeconds(Number(entry)));
    } catch {
      // gone meanwhile
    }
  }
  return seconds;
}

/**
 * Starts measuring the CPU of named groups of processes and of PostgreSQL (every one of its
 * processes, whoever uses them); the returned function gives each group's CPU microseconds per
 * unit of work (`n` messages, requests, …) since the start.
 */
export async function cpuMeter<G extends string>(groups: Record<G, () => number[]>) {
  const names = Object.keys(groups) as G[];
  const read = async () => {
    const byGroup = new Map<G, number>();
    for (const name of names)
      byGroup.set(
        name,
        (await Promise.all(groups[name]().map(cpuSeconds))).reduce((a, b) => a + b, 0),
      );
    return { byGroup, postgres: await postgresCpuSeconds() };
  };
  const before = await read();
  return async (n: number): Promise<Record<G | 'postgres', number>> => {
    const after = await read();
    const per = (seconds: number) => Math.round((seconds * 1e6) / n);
    let postgres = 0;
    for (const [pid, seconds] of after.postgres) postgres += seconds - (before.postgres.get(pid) ?? 0);
    const result = { postgres: per(postgres) } as Record<G | 'postgres', number>;
    for (const name of names) result[name] = per((after.byGroup.get(name) ?? 0) - (before.byGroup.get(name) ?? 0));
    return result;
  };
}
