import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generateApiKey } from '../src/identity/api-key-format.ts';

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

function start(env: Record<string, string>): Started {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const child = spawn(process.execPath, [MAIN], { env: { ...inherited, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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

  test('invalid configuration exits with code 2 and names the variable', async () => {
    const bad = start({ DATA_DIR: dataDir, PORT: 'eighty', ROLE: 'worker' });
    assert.equal(await bad.exited, 2);
    assert.match(bad.output(), /PORT must be an integer/);
    assert.match(bad.output(), /ROLE=worker needs DATABASE_URL/);
  });
});
