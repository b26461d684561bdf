import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './free-port.ts';
import { tools } from './tools.ts';

const run = promisify(execFile);

/**
 * A PostgreSQL cluster of a test's own, in a temporary directory: `initdb` + `pg_ctl` from the
 * machine's PostgreSQL, run as the `postgres` user when the tests run as root (PostgreSQL refuses
 * root). A test can stop it, start it again on the same port and data, or freeze it (SIGSTOP on
 * every one of its processes) — what a real outage looks like from Hopper's side. Tests that use it
 * skip with `tools.postgresServer.skip` where PostgreSQL's server is not installed.
 */
export interface PgCluster {
  readonly url: string;
  readonly port: number;
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  /** SIGSTOP (freeze) or SIGCONT (thaw) to the postmaster and every backend. */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): void;
  destroy(): Promise<void>;
}

const asRoot = process.getuid?.() === 0;

export async function startPgCluster(): Promise<PgCluster> {
  const bin = tools.postgresServer.path;
  if (!bin) throw new Error(tools.postgresServer.skip || 'initdb is missing');
  const dir = await mkdtemp(join(tmpdir(), 'hopper-pg-'));
  const data = join(dir, 'data');
  if (asRoot) {
    const ids = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gids = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    await chown(dir, Number(ids.stdout.trim()), Number(gids.stdout.trim()));
    await chmod(dir, 0o700);
  }
  const as = (cmd: string, args: string[]) => (asRoot ? run('runuser', ['-u', 'postgres', '--', cmd, ...args]) : run(cmd, args));
  const port = await freePort();
  await as(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`;
  const pgCtl = (args: string[]) => as(join(bin, 'pg_ctl'), ['-D', data, ...args]);
  const start = async () => {
    await pgCtl(['-w', '-t', '30', '-l', join(dir, 'log'), '-o', options, 'start']);
  };
  await start();
  const signal = (sig: 'SIGSTOP' | 'SIGCONT') => {
    const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const children = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean)
      .map(Number);
    for (const p of [pid, ...children]) process.kill(p, sig);
  };
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    async stop(mode = 'fast') {
      await pgCtl(['-w', '-t', '30', '-m', mode, 'stop']);
    },
    signal,
    async destroy() {
      try {
        signal('SIGCONT');
      } catch {
        // not running
      }
      await pgCtl(['-m', 'immediate', 'stop']).catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}
