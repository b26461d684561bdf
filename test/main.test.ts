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

/**
 * The README's start command, for real: `node src/main.ts` in a child process on the embedded
 * default (PGlite in a fresh DATA_DIR, self-signed TLS), exactly as `npm start` runs it.
 */
const MAIN = join(import.meta.dirname, '..', 'src', 'main.ts');

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function start(env: Record<string, string>, command: [string, ...string[]] = [process.execPath, MAIN]): Started {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const [file, ...args] = command;
  const child = spawn(file, args, {
    cwd: join(import.meta.dirname, '..'),
    env: { ...inherited, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
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
async function waitForHealth(port: number, dataDir: string, since: number, deadlineMs = 30_000): Promise<number> {
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
    const dir = await mkdtemp(join(tmpdir(), 'hopper-main-'));
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
    const dir = await mkdtemp(join(tmpdir(), 'hopper-main-'));
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
    const dir = await mkdtemp(join(tmpdir(), 'hopper-main-'));
    const port = await freePort();
    const started = start({ DATA_DIR: dir, PORT: String(port) }, ['npm', 'start', '--silent']);
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

  test('invalid configuration exits with code 2 and names the variable', async () => {
    const bad = start({ DATA_DIR: dataDir, PORT: 'eighty', ROLE: 'worker' });
    assert.equal(await bad.exited, 2);
    assert.match(bad.output(), /PORT must be an integer/);
    assert.match(bad.output(), /ROLE=worker needs DATABASE_URL/);
  });

  test('with SMTP_URL set and PUBLIC_URL / MAIL_FROM left at localhost, start-up exits with code 2 naming both', async () => {
    const bad = start({ DATA_DIR: dataDir, SMTP_URL: 'smtp://127.0.0.1:2', PUBLIC_URL: '', MAIL_FROM: '' });
    assert.equal(await bad.exited, 2);
    assert.match(bad.output(), /SMTP_URL is set/);
    assert.match(bad.output(), /PUBLIC_URL \(https:\/\/localhost:\d+, the default\)/);
    assert.match(bad.output(), /MAIL_FROM \(Hopper <no-reply@localhost>, the default\)/);
  });
});

describe('stopping under load', () => {
  test('SIGTERM under 32 concurrent requests: every request answered (no 5xx) or refused cleanly, exit 0', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'hopper-main-'));
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
