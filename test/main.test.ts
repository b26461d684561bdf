import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generateApiKey } from '../src/api-key-format.ts';
import { WASM_FLAGS } from './sending/support/hopper-process.ts';
import { freePort } from './support/free-port.ts';
import { seededDataDir } from './support/pglite-template.ts';

/**
 * The README's start command, for real: `node src/main.ts` in a child process on the embedded
 * default (PGlite in a fresh DATA_DIR, self-signed TLS), exactly as `npm start` runs it. The tests
 * of a first start and of a start refused begin with an empty DATA_DIR; the others with one whose
 * database is already created and migrated (test/support/pglite-template.ts), which saves each
 * about 5 s of CPU, as no one is created before the first start there either.
 */
const MAIN = join(import.meta.dirname, '..', 'src', 'main.ts');

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** The children started `detached`, each the leader of its own process group. */
const groupLeaders = new WeakSet<ChildProcess>();
/** Every process started and not yet gone: killed when the file ends, whatever failed on the way. */
const running = new Set<ChildProcess>();
after(() => {
  for (const child of running) {
    if (child.pid === undefined) continue;
    try {
      // A detached child leads a process group of its own: npm and the Hopper it started go together.
      process.kill(groupLeaders.has(child) ? -child.pid : child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** Starts `command` (Hopper itself by default); `detached`: in a process group of its own, as a terminal runs it. */
function start(
  env: Record<string, string>,
  command: [string, ...string[]] = [process.execPath, ...WASM_FLAGS, MAIN],
  detached = false,
): Started {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const [file, ...args] = command;
  const child = spawn(file, args, {
    cwd: join(import.meta.dirname, '..'),
    env: { ...inherited, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached,
  });
  running.add(child);
  if (detached) groupLeaders.add(child);
  child.on('exit', () => running.delete(child));
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

function get(url: string, ca: string, key?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { ca, headers: key ? { authorization: `Bearer ${key}` } : {} }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

/** Polls until /health answers over HTTPS; returns the milliseconds it took from `since`. */
async function waitForHealth(port: number, dataDir: string, since: number, deadlineMs = 120_000): Promise<number> {
  const deadline = since + deadlineMs;
  while (Date.now() < deadline) {
    try {
      const ca = await readFile(join(dataDir, 'tls', 'cert.pem'), 'utf8');
      if ((await get(`https://localhost:${port}/health`, ca)) === 200) return Date.now() - since;
    } catch {
      // not up yet
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('Hopper did not answer /health in time');
}

/** Polls `done` every 25 ms, for 30 s at most. */
async function waitFor(done: () => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function stop(started: Started): Promise<number | null> {
  started.child.kill('SIGTERM');
  return started.exited;
}

describe('npm start (src/main.ts)', () => {
  let dataDir: string;
  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'hopper-main-'));
  });
  after(() => rm(dataDir, { recursive: true, force: true }));

  test('first start prints the admin key once, answers /health over HTTPS, refuses a second process, and stops cleanly', async (t) => {
    const port = await freePort();
    const env = { DATA_DIR: dataDir, PORT: String(port) };
    const since = Date.now();
    const first = start(env);
    const emptyMs = await waitForHealth(port, dataDir, since);
    t.diagnostic(`empty DATA_DIR: /health answered after ${emptyMs} ms`);

    const key = /(hop_[0-9A-Za-z]{46})/.exec(first.output())?.[1];
    assert.ok(key, `the banner shows the key: ${first.output()}`);
    assert.match(first.output(), /curl --cacert .*tls\/cert\.pem -H 'Authorization: Bearer hop_/);
    const ca = await readFile(join(dataDir, 'tls', 'cert.pem'), 'utf8');
    assert.equal(await get(`https://localhost:${port}/v3/users`, ca, key), 200);

    const second = start({ DATA_DIR: dataDir, PORT: String(await freePort()) });
    assert.equal(await second.exited, 2);
    assert.match(second.output(), /is in use by process \d+/);

    assert.equal(await stop(first), 0, 'SIGTERM ends the process gracefully');
    assert.ok(!existsSync(join(dataDir, 'pgdata.lock')), 'the lock is released');

    const again = start(env);
    const existingMs = await waitForHealth(port, dataDir, Date.now());
    t.diagnostic(`existing DATA_DIR: /health answered after ${existingMs} ms`);
    assert.doesNotMatch(again.output(), /hop_/, 'the key is printed only once');
    assert.equal(await get(`https://localhost:${port}/v3/users`, ca, key), 200, 'the key survives a restart');
    assert.equal(await stop(again), 0);
  });

  test('a stale lock left by a killed process is taken over', async () => {
    const port = await freePort();
    const dir = await seededDataDir('hopper-main-');
    const crashed = start({ DATA_DIR: dir, PORT: String(port) });
    await waitForHealth(port, dir, Date.now());
    crashed.child.kill('SIGKILL');
    await crashed.exited;
    assert.ok(existsSync(join(dir, 'pgdata.lock')), 'SIGKILL leaves the lock behind');
    const next = start({ DATA_DIR: dir, PORT: String(port) });
    await waitForHealth(port, dir, Date.now());
    assert.equal(await stop(next), 0);
    await rm(dir, { recursive: true, force: true });
  });

  test('BOOTSTRAP_ADMIN_KEY makes that key an Administrator key', async () => {
    const dir = await seededDataDir('hopper-main-');
    const port = await freePort();
    const key = generateApiKey();
    const started = start({ DATA_DIR: dir, PORT: String(port), BOOTSTRAP_ADMIN_KEY: key });
    await waitForHealth(port, dir, Date.now());
    const ca = await readFile(join(dir, 'tls', 'cert.pem'), 'utf8');
    assert.equal(await get(`https://localhost:${port}/v3/teams`, ca, key), 200);
    assert.doesNotMatch(started.output(), /hop_/, 'nothing is printed when the operator supplied the key');
    assert.equal(await stop(started), 0);
    await rm(dir, { recursive: true, force: true });
  });

  test('SIGTERM to the npm process started by `npm start` stops Hopper gracefully within 10 s', async (t) => {
    const dir = await seededDataDir('hopper-main-');
    const port = await freePort();
    const started = start({ DATA_DIR: dir, PORT: String(port) }, ['npm', 'start', '--silent'], true);
    t.after(() => started.child.kill('SIGKILL'));
    // npm itself and a first start on a loaded machine take a while: the 10 s are for stopping.
    await waitForHealth(port, dir, Date.now(), 120_000);
    const since = Date.now();
    const code = await Promise.race([stop(started), new Promise<string>((resolve) => setTimeout(resolve, 10_000, 'timeout'))]);
    assert.equal(code, 0, `npm exits 0 within 10 s (${Date.now() - since} ms): ${started.output()}`);
    assert.ok(!existsSync(join(dir, 'pgdata.lock')), 'Hopper itself stopped and released its lock');
    await assert.rejects(get(`https://localhost:${port}/health`, ''), 'nothing listens any more');
    await rm(dir, { recursive: true, force: true });
  });

  test('with PORT taken, the first start exits 2 naming PORT before it creates anything; a HOST not of this machine names HOST', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'hopper-main-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    t.after(() => taken.close());
    const port = (taken.address() as { port: number }).port;
    const blocked = start({ DATA_DIR: dir, PORT: String(port) });
    assert.equal(await blocked.exited, 2, blocked.output());
    assert.equal(
      blocked.output(),
      `Cannot listen on 127.0.0.1:${port}: another program is using port ${port}. ` +
        'Set PORT to a free port (PORT=8444 npm start), or stop the other program. Nothing was created.\n',
    );
    assert.ok(!existsSync(join(dir, 'pgdata')), 'no database, so no Administrator whose key was never shown');

    const elsewhere = start({ DATA_DIR: dir, PORT: String(port), HOST: '192.0.2.1' });
    assert.equal(await elsewhere.exited, 2, elsewhere.output());
    assert.match(elsewhere.output(), /^Cannot listen on 192\.0\.2\.1:\d+: HOST is not an address of this machine\. Set HOST to/);
  });

  test('invalid configuration exits with code 2 and names the variable', async () => {
    const bad = start({ DATA_DIR: dataDir, PORT: 'eighty', ROLE: 'worker' });
    assert.equal(await bad.exited, 2);
    assert.match(bad.output(), /PORT must be an integer/);
    assert.match(bad.output(), /ROLE=worker needs DATABASE_URL/);
    assert.doesNotMatch(bad.output(), /PUBLIC_URL/, 'the default PUBLIC_URL is not blamed for PORT');
  });

  test('with SMTP_URL set and PUBLIC_URL / MAIL_FROM left at localhost, start-up exits with code 2 naming both', async () => {
    const bad = start({ DATA_DIR: dataDir, SMTP_URL: 'smtp://127.0.0.1:2', PUBLIC_URL: '', MAIL_FROM: '' });
    assert.equal(await bad.exited, 2);
    assert.match(bad.output(), /SMTP_URL is set/);
    assert.match(bad.output(), /PUBLIC_URL \(https:\/\/localhost:\d+, the default\)/);
    assert.match(bad.output(), /MAIL_FROM \(Hopper <no-reply@localhost>, the default\)/);
  });
});

/** The JSON log lines of `output` whose message is `msg`. */
function logLines(output: string, msg: string): Record<string, unknown>[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((entry) => entry.msg === msg);
}

describe('Ctrl-C', () => {
  // docs/operations.md, "Stopping Hopper". CTRL_C_TRIALS=10 repeats the first test ten times.
  const trials = Number(process.env.CTRL_C_TRIALS ?? 2);

  test(`SIGINT to the process group of npm start (npm forwards it a second time) drains and logs the stop, ${trials} times in a row`, async (t) => {
    const dir = await seededDataDir('hopper-main-');
    t.after(() => rm(dir, { recursive: true, force: true }));
    const times: string[] = [];
    for (let trial = 1; trial <= trials; trial++) {
      const port = await freePort();
      const started = start({ DATA_DIR: dir, PORT: String(port), LOG_LEVEL: 'info' }, ['npm', 'start', '--silent'], true);
      const group = started.child.pid as number;
      t.after(() => {
        if (started.child.exitCode === null) process.kill(-group, 'SIGKILL');
      });
      await waitForHealth(port, dir, Date.now(), 120_000);
      const since = performance.now();
      process.kill(-group, 'SIGINT');
      const code = await started.exited;
      const exitedMs = Math.round(performance.now() - since);
      const output = started.output();
      assert.equal(code, 0, `trial ${trial}: npm and Hopper exit 0:\n${output}`);
      assert.equal(logLines(output, 'stopping').length, 1, `trial ${trial}: one "stopping" line:\n${output}`);
      const [stopped] = logLines(output, 'stopped');
      assert.ok(stopped, `trial ${trial}: the "stopped" line, after the drain:\n${output}`);
      assert.doesNotMatch(output, /stopped at once/, `trial ${trial}: npm's second SIGINT is not taken for another Ctrl-C`);
      assert.ok(!existsSync(join(dir, 'pgdata.lock')), `trial ${trial}: the database was closed and its lock released`);
      times.push(`stopped in ${stopped.ms} ms, exited in ${exitedMs} ms`);
    }
    t.diagnostic(`Ctrl-C trials: ${times.join('; ')}`);
  });

  test('a second SIGINT, a second or more after the first, stops at once (exit 130) a stop held by a request in flight', async (t) => {
    const dir = await seededDataDir('hopper-main-');
    t.after(() => rm(dir, { recursive: true, force: true }));
    const port = await freePort();
    const key = generateApiKey();
    const env = { DATA_DIR: dir, PORT: String(port), BOOTSTRAP_ADMIN_KEY: key, SHUTDOWN_TIMEOUT: '120s', LOG_LEVEL: 'debug' };
    const started = start(env);
    t.after(() => started.child.kill('SIGKILL'));
    await waitForHealth(port, dir, Date.now(), 120_000);
    // A request whose body never ends: the drain waits for it (SHUTDOWN_TIMEOUT, two minutes here).
    const ca = await readFile(join(dir, 'tls', 'cert.pem'), 'utf8');
    const pending = https.request(`https://localhost:${port}/v3/teams`, {
      method: 'POST',
      ca,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': '100' },
    });
    pending.on('error', () => {});
    pending.write('{"name":');
    t.after(() => pending.destroy());
    await waitFor(() => logLines(started.output(), 'incoming request').some((line) => JSON.stringify(line).includes('/v3/teams')));
    started.child.kill('SIGINT');
    await waitFor(() => logLines(started.output(), 'stopping').length > 0);
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    assert.equal(started.child.exitCode, null, 'still draining: the request holds the stop');
    const since = performance.now();
    started.child.kill('SIGINT');
    assert.equal(await started.exited, 130);
    const ms = Math.round(performance.now() - since);
    t.diagnostic(`exited ${ms} ms after the second SIGINT`);
    assert.ok(ms < 30_000, `at once, not after SHUTDOWN_TIMEOUT (${ms} ms)`);
    assert.equal(logLines(started.output(), 'stopped at once: a second signal came while stopping').length, 1, started.output());
  });
});

describe('stopping under load', () => {
  test('SIGTERM under 32 concurrent requests: every request answered (no 5xx) or refused cleanly, exit 0', async (t) => {
    const dir = await seededDataDir('hopper-main-');
    const port = await freePort();
    const key = generateApiKey();
    // Thousands of requests with one key: the per-key limit (a 429) is not what is tested here.
    const started = start({ DATA_DIR: dir, PORT: String(port), BOOTSTRAP_ADMIN_KEY: key, RATE_LIMIT: '10000000' });
    await waitForHealth(port, dir, Date.now(), 90_000);
    const ca = await readFile(join(dir, 'tls', 'cert.pem'), 'utf8');
    const agent = new https.Agent({ keepAlive: true, maxSockets: 32, ca });
    const statuses = new Map<number, number>();
    const refusals = new Map<string, number>();
    let signalled = 0;
    let exited = false;
    void started.exited.then(() => {
      exited = true;
    });
    const one = () =>
      new Promise<void>((resolve) => {
        const req = https.get(`https://localhost:${port}/v3/users`, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
          res.resume();
          res.on('end', () => {
            statuses.set(res.statusCode ?? 0, (statuses.get(res.statusCode ?? 0) ?? 0) + 1);
            resolve();
          });
          res.on('error', () => {
            refusals.set('body cut', (refusals.get('body cut') ?? 0) + 1);
            resolve();
          });
        });
        req.on('error', (error: NodeJS.ErrnoException) => {
          refusals.set(error.code ?? error.message, (refusals.get(error.code ?? error.message) ?? 0) + 1);
          resolve();
        });
      });
    const clients = Array.from({ length: 32 }, async () => {
      while (!exited) await one();
    });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    signalled = [...statuses.values()].reduce((a, b) => a + b, 0);
    started.child.kill('SIGTERM');
    assert.equal(await started.exited, 0, `a clean exit:\n${started.output()}`);
    await Promise.all(clients);
    agent.destroy();
    const fivexx = [...statuses].filter(([status]) => status >= 500);
    t.diagnostic(`answers: ${JSON.stringify(Object.fromEntries(statuses))}; refused: ${JSON.stringify(Object.fromEntries(refusals))}`);
    assert.ok(signalled > 0, 'requests were answered before the signal');
    assert.deepEqual(fivexx, [], 'no 5xx');
    assert.deepEqual([...statuses.keys()], [200], 'every answer is 200');
    // Refused cleanly: the connection was not accepted (listener closed) or closed by the server
    // before a request was read — never a request cut off mid-answer.
    for (const reason of refusals.keys()) assert.ok(['ECONNREFUSED', 'ECONNRESET'].includes(reason), `refused cleanly, not: ${reason}`);
    assert.doesNotMatch(started.output(), /driver has already been destroyed|request failed/);
    await rm(dir, { recursive: true, force: true });
  });
});
