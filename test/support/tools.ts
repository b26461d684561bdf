import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * The tools from outside npm that some tests use, looked up on PATH (never at a fixed path), each
 * with the Debian package that brings it. A test that needs one is skipped where it is missing,
 * with `skip: tools.x.skip`: the message names the package, and `npm test` lists the skips and
 * fails on them under TEST_REQUIRE_TOOLS=1 (CI, which installs them all), so a missing tool is
 * never a silent hole in the run.
 */
export interface Tool {
  /** The executable's absolute path, when found. */
  readonly path: string | undefined;
  /** false when found; otherwise the skip message scripts/test.ts recognises. */
  readonly skip: string | false;
}

/** The first executable named `command` on PATH. */
export function onPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

function tool(what: string, pkg: string, path: string | undefined): Tool {
  return { path, skip: path === undefined && `needs ${what} (Debian package ${pkg})` };
}

const cache = new Map<string, Tool>();
function once(key: string, find: () => Tool): Tool {
  let found = cache.get(key);
  if (!found) {
    found = find();
    cache.set(key, found);
  }
  return found;
}

/** PostgreSQL's initdb and pg_ctl: on PATH, else where `pg_config --bindir` says (Debian keeps them off PATH). */
function postgresServer(): Tool {
  const initdb = onPath('initdb');
  if (initdb && onPath('pg_ctl')) return tool('initdb', 'postgresql', join(initdb, '..'));
  const pgConfig = onPath('pg_config');
  if (pgConfig) {
    const bindir = spawnSync(pgConfig, ['--bindir'], { encoding: 'utf8' }).stdout?.trim();
    if (bindir) {
      try {
        accessSync(join(bindir, 'initdb'), constants.X_OK);
        accessSync(join(bindir, 'pg_ctl'), constants.X_OK);
        return tool('initdb', 'postgresql', bindir);
      } catch {
        // pg_config without the server.
      }
    }
  }
  return tool('initdb', 'postgresql', undefined);
}

function perlModule(module: string, pkg: string): Tool {
  const perl = onPath('perl');
  const loads = perl !== undefined && spawnSync(perl, [`-M${module}`, '-e', '1'], { stdio: 'ignore' }).status === 0;
  return tool(module, pkg, loads ? perl : undefined);
}

export const tools = {
  get chromium(): Tool {
    return once('chromium', () => tool('chromium', 'chromium', onPath('chromium')));
  },
  get jq(): Tool {
    return once('jq', () => tool('jq', 'jq', onPath('jq')));
  },
  get promtool(): Tool {
    return once('promtool', () => tool('promtool', 'prometheus', onPath('promtool')));
  },
  get spamassassin(): Tool {
    return once('spamassassin', () => tool('spamassassin', 'spamassassin', onPath('spamassassin')));
  },
  get redisServer(): Tool {
    return once('redis-server', () => tool('redis-server', 'redis-server', onPath('redis-server')));
  },
  get sisimai(): Tool {
    return once('sisimai', () => perlModule('Sisimai', 'libsisimai-perl'));
  },
  /** The directory holding initdb and pg_ctl. */
  get postgresServer(): Tool {
    return once('postgres', postgresServer);
  },
};
