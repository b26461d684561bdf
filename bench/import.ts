import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { generateApiKey } from '../src/api-key-format.ts';
import { freePort } from '../test/support/free-port.ts';

/**
 * `npm run bench:import`: 100,000 contacts in one CSV imported through the API on PostgreSQL,
 * against Hopper started as `npm start` runs it (node src/main.ts, ROLE=all) in another process.
 * The file goes up in two requests of 50,000 rows (the per-request limit, as the CLI splits it).
 *
 *   (a) baseline: the same rows inserted straight into a table shaped like contacts, 1,000 rows a
 *       multi-row INSERT, from this process (no HTTP, parsing, validation, matching or tags);
 *   (b) the first import: every row created, each with two tags;
 *   (c) the same file again: every row matched by email and updated, nothing created.
 *
 * Prints rows/s, the ratio to the baseline, and the server's peak RSS (VmHWM). Targets: (b) ≥
 * 10,000 rows/s, peak RSS ≤ 250 MB. Environment: DATABASE_URL (a server; a database is made for
 * the run and dropped), default postgres://postgres@127.0.0.1:5432/postgres; BENCH_DATABASE=pglite
 * runs Hopper on PGlite in a fresh data directory instead, without (a), which it could not reach
 * (the server holds the database), and prints the server's CPU time with each import; BENCH_ROWS
 * (default 100,000) for a smaller first try; BENCH_PROF=DIR writes the server's CPU profile
 * (--cpu-prof) there.
 */
const PGLITE = process.env.BENCH_DATABASE === 'pglite';
const ADMIN_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROWS = Number(process.env.BENCH_ROWS ?? 100_000);
const PER_REQUEST = 50_000;

function csvFile(): string[] {
  const lines = Array.from({ length: ROWS }, (_, i) => {
    const phone = `727${String(2_000_000 + i).padStart(7, '0')}`;
    return `Person${i},Bench,person${i}@example.com,${phone},America/New_York,Spring;Buyers ${i % 10}`;
  });
  const header = 'first_name,last_name,email,phone,time_zone,tags';
  const chunks: string[] = [];
  for (let start = 0; start < ROWS; start += PER_REQUEST) chunks.push(`${header}\n${lines.slice(start, start + PER_REQUEST).join('\n')}\n`);
  return chunks;
}

function post(url: string, ca: string, key: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', ca, headers: { authorization: `Bearer ${key}`, 'content-type': 'text/csv' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function waitForHealth(port: number, dataDir: string): Promise<string> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    try {
      const ca = await readFile(join(dataDir, 'tls', 'cert.pem'), 'utf8');
      const ok = await new Promise<boolean>((resolve) => {
        request(`https://localhost:${port}/health`, { ca }, (res) => {
          res.resume();
          resolve(res.statusCode === 200);
        })
          .on('error', () => resolve(false))
          .end();
      });
      if (ok) return ca;
    } catch {
      // not up yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('Hopper did not start');
}

/** The server's CPU time so far (user and system), in seconds. */
async function cpuSeconds(child: ChildProcess): Promise<number> {
  const fields = (await readFile(`/proc/${child.pid}/stat`, 'utf8')).split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function peakRss(child: ChildProcess): Promise<number> {
  const status = await readFile(`/proc/${child.pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

async function baseline(url: string, chunks: string[]): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`CREATE TABLE bench_contacts (id bigserial PRIMARY KEY, user_id bigint, first_name text, last_name text,
    email text, phone text, time_zone text, status text DEFAULT 'Subscribed', created_at timestamptz, updated_at timestamptz)`);
  const rows = chunks.flatMap((chunk) => chunk.trim().split('\n').slice(1)).map((line) => line.split(','));
  const started = performance.now();
  for (let start = 0; start < rows.length; start += 1000) {
    const batch = rows.slice(start, start + 1000);
    const values = batch.map((_, i) => `($${i * 5 + 1}, $${i * 5 + 2}, $${i * 5 + 3}, $${i * 5 + 4}, $${i * 5 + 5}, 1, now(), now())`);
    await client.query(
      `INSERT INTO bench_contacts (first_name, last_name, email, phone, time_zone, user_id, created_at, updated_at) VALUES ${values.join(',')}`,
      batch.flatMap((row) => row.slice(0, 5)),
    );
  }
  const seconds = (performance.now() - started) / 1000;
  await client.end();
  return ROWS / seconds;
}

async function main(): Promise<void> {
  const database = `hopper_bench_import_${Date.now()}`;
  const admin = PGLITE ? undefined : new pg.Client({ connectionString: ADMIN_URL });
  await admin?.connect();
  await admin?.query(`CREATE DATABASE ${database}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  const { DATABASE_URL: _, ...environment } = process.env;
  const dataDir = await mkdtemp(join(tmpdir(), 'hopper-bench-import-'));
  const port = await freePort();
  const key = generateApiKey();
  const child = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_PROF] : []),
      join(import.meta.dirname, '..', 'src', 'main.ts'),
    ],
    {
      env: {
        ...environment,
        ...(PGLITE ? {} : { DATABASE_URL: url.toString() }),
        DATA_DIR: dataDir,
        PORT: String(port),
        BOOTSTRAP_ADMIN_KEY: key,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  try {
    const ca = await waitForHealth(port, dataDir);
    console.log(
      `${ROWS} rows; load average at the start: ${loadavg()
        .map((n) => n.toFixed(2))
        .join(', ')} (1, 5, 15 min)`,
    );
    const chunks = csvFile();
    const base = PGLITE ? undefined : await baseline(url.toString(), chunks);
    console.log(
      base === undefined
        ? '(a) baseline: not on PGlite, whose database the server holds'
        : `(a) baseline, multi-row INSERT from this process: ${Math.round(base)} rows/s`,
    );
    const users = JSON.parse(
      (await new Promise<string>((resolve, reject) => {
        request(`https://localhost:${port}/v3/users`, { ca, headers: { authorization: `Bearer ${key}` } }, (res) => {
          let text = '';
          res.on('data', (chunk) => {
            text += chunk;
          });
          res.on('end', () => resolve(text));
        })
          .on('error', reject)
          .end();
      })) as string,
    ) as { data: { id: number }[] };
    const userId = users.data[0]?.id;
    const importUrl = `https://localhost:${port}/v3/users/${userId}/contacts/import`;
    for (const [label, expect] of [
      ['(b) first import (all created)', 'created'],
      ['(c) same file again (all updated)', 'updated'],
    ] as const) {
      const started = performance.now();
      const cpuBefore = await cpuSeconds(child);
      let done = 0;
      for (const chunk of chunks) {
        const reply = await post(importUrl, ca, key, chunk);
        if (reply.status !== 200) throw new Error(`import answered ${reply.status}: ${reply.body.slice(0, 500)}`);
        const result = JSON.parse(reply.body) as Record<string, number | unknown[]>;
        done += result[expect] as number;
        if ((result.refused as unknown[]).length > 0) throw new Error(`rows refused: ${reply.body.slice(0, 500)}`);
      }
      const seconds = (performance.now() - started) / 1000;
      const rate = ROWS / seconds;
      const cpu = (await cpuSeconds(child)) - cpuBefore;
      const ratio = base === undefined ? `server CPU ${cpu.toFixed(1)} s` : `${(rate / base).toFixed(2)} × baseline`;
      console.log(
        `${label}: ${done} ${expect} in ${seconds.toFixed(1)} s = ${Math.round(rate)} rows/s (${ratio}); server peak RSS so far ${Math.round(await peakRss(child))} MB`,
      );
    }
    console.log('targets: (b) ≥ 10,000 rows/s, peak RSS ≤ 250 MB');
    console.log(
      `load average at the end: ${loadavg()
        .map((n) => n.toFixed(2))
        .join(', ')} (1, 5, 15 min)`,
    );
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    await admin?.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin?.end();
    await rm(dataDir, { recursive: true, force: true });
  }
}

await main();
