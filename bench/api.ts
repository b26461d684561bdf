import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { sql } from 'kysely';
import pg from 'pg';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { openJobQueue } from '../src/db/job-queue.ts';
import { createApiKey } from '../src/identity/api-keys.ts';
import { bootstrapAdministrator } from '../src/identity/bootstrap.ts';
import { publicFileUrl, readableSize } from '../src/media/media.ts';
import { COUNTERS } from '../src/messages/reporting.ts';
import { formatTimestamp } from '../src/time.ts';
import { loadTls } from '../src/tls.ts';

/**
 * `npm run bench:api`: the read and search paths of the voicemail drop API on PostgreSQL, with
 * 1,000,000 drops in a fresh schema (100,000 of them the benchmark user's), measured with
 * autocannon over real HTTPS against a baseline:
 *
 *   (a) baseline: a bare node:https server answering each request with one primary-key query
 *       through a pg.Pool, writing the same JSON document as Hopper's read;
 *   (a') the same baseline with its query as a named (prepared) statement, for comparison;
 *   (b) Hopper's GET /v3/voicemail_drops/{id} with a Bearer key (random ids of the user's drops);
 *   (c) Hopper's search, page one with two OR-ed filters, the same search over and over (as when
 *       a list is paged through or refreshed: its total is counted once, see CountCache);
 *   (c') the same search with a third filter that differs on every request, so that every total
 *       is counted (no target: for the record).
 *
 * The load generator (autocannon) runs in a child process so it does not share the server's event
 * loop. Targets: b/a ≥ 0.6 in requests per second, search p50 ≤ 20 ms.
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_DURATION
 * (seconds per run, default 10), BENCH_CONNECTIONS (default 10), BENCH_EXPLAIN=1 (print the plans
 * of the search's two statements), BENCH_RUNS (comma list of a,a2,b,c,c2 to run a subset), BENCH_KEEP=1 (keep the schema, to study it with psql).
 */
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const WARM_UP = 2;
const TOTAL_DROPS = 1_000_000;
const USERS = 10; // the benchmark user and nine others, 100,000 drops each
const SEARCH_QUERY = 'status=Scheduled&name=house';

interface LoadResult {
  label: string;
  /** CPU per request, in microseconds: this process (the servers) and every PostgreSQL process. */
  cpu?: { server: number; postgres: number };
  requestsPerSecond: number;
  p50: number;
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
}

interface LoadJob {
  label: string;
  base: string;
  paths: string[];
  headers: Record<string, string>;
  duration: number;
}

// ---------------------------------------------------------------------------------------------
// The child process: autocannon, away from the servers' event loop.

async function runLoad(job: LoadJob): Promise<LoadResult> {
  // @ts-expect-error autocannon ships no type declarations
  const { default: autocannon } = await import('autocannon');
  const result = await autocannon({
    url: job.base,
    connections: CONNECTIONS,
    duration: job.duration,
    headers: job.headers,
    requests: [
      {
        method: 'GET',
        setupRequest: (request: { path: string }) => {
          request.path = job.paths[Math.floor(Math.random() * job.paths.length)] as string;
          return request;
        },
      },
    ],
  });
  return {
    label: job.label,
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    total: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}

if (process.argv[2] === '--load') {
  process.on('message', async (job: LoadJob) => {
    process.send?.(await runLoad(job));
    process.disconnect();
  });
} else {
  await main();
}

/** Runs one autocannon job in a fresh child process. */
function load(job: LoadJob): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = fork(import.meta.filename, ['--load'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.once('message', (result) => resolve(result as LoadResult));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`load generator exited with ${code}`));
    });
    child.send(job);
  });
}

async function measure(job: Omit<LoadJob, 'duration'>): Promise<LoadResult> {
  await load({ ...job, duration: WARM_UP });
  const server = process.cpuUsage();
  const postgres = await postgresCpu();
  const result = await load({ ...job, duration: DURATION });
  const serverUs = process.cpuUsage(server);
  const postgresUs = cpuSince(postgres, await postgresCpu());
  result.cpu = { server: (serverUs.user + serverUs.system) / result.total, postgres: postgresUs / result.total };
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${job.label}: ${result.non2xx} non-2xx responses and ${result.errors} errors`);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// The parent: database, seed, servers, runs, report.

async function main(): Promise<void> {
  const started = Date.now();
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const dataDir = await mkdtemp(join(tmpdir(), 'hopper-bench-'));
  const config = loadConfig({
    ...process.env,
    DATABASE_URL,
    DATABASE_SCHEMA: schema,
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    PORT: '0',
    PUBLIC_URL: 'https://localhost:8443',
    LOG_LEVEL: 'silent',
    ROLE: 'api',
  });
  const database = await openDatabase(config);
  const queue = await openJobQueue(database, config);
  const servers: { close(): Promise<unknown> }[] = [];
  let pool: pg.Pool | undefined;
  try {
    await bootstrapAdministrator(database.db, config);
    const seeded = await seed(database.db);
    console.log(`seeded ${TOTAL_DROPS.toLocaleString('en-US')} drops in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const tls = await loadTls(config);
    const app = await buildApp(config, { database, queue, https: { key: tls.key, cert: tls.cert } });
    await app.listen({ host: '127.0.0.1', port: 0 });
    servers.push(app);
    const hopperBase = `https://127.0.0.1:${(app.server.address() as { port: number }).port}`;

    pool = new pg.Pool({ connectionString: DATABASE_URL, max: 20, options: `-c search_path=${schema}` });
    const baseline = await startBaseline(pool, tls, config.publicUrl);
    servers.push({ close: () => new Promise((resolve) => baseline.close(resolve)) });
    const baselineBase = `https://127.0.0.1:${(baseline.address() as { port: number }).port}`;

    const headers = { authorization: `Bearer ${seeded.key}` };
    const readPaths = seeded.sampleIds.map((id) => `/v3/voicemail_drops/${id}`);
    const searchPath = `/v3/users/${seeded.userId}/voicemail_drops?${SEARCH_QUERY}`;
    await sanityCheck(hopperBase, baselineBase, headers, readPaths[0] as string, searchPath);
    if (process.env.BENCH_EXPLAIN === '1') await explainSearch(database.db, seeded.userId);

    const runs = new Set((process.env.BENCH_RUNS ?? 'a,a2,b,c,c2').split(','));
    const skipped = (label: string): LoadResult => ({
      label,
      requestsPerSecond: Number.NaN,
      p50: Number.NaN,
      p99: Number.NaN,
      total: 0,
      non2xx: 0,
      errors: 0,
    });
    const run = (key: string, label: string, base: string, paths: string[]) =>
      runs.has(key) ? measure({ label, base, paths, headers }) : Promise.resolve(skipped(label));
    const a = await run('a', '(a) baseline https + pg', baselineBase, readPaths);
    const a2 = await run(
      'a2',
      "(a') baseline, prepared",
      baselineBase,
      readPaths.map((path) => `/prepared${path}`),
    );
    const b = await run('b', '(b) Hopper read', hopperBase, readPaths);
    const c = await run('c', '(c) Hopper search', hopperBase, [searchPath]);
    // Every request a filter set of its own: no total can be reused, each is counted.
    const uncounted = Array.from({ length: 5000 }, (_, i) => `${searchPath}&description=spring-${i}`);
    const c2 = await run('c2', "(c') search, new filters", hopperBase, uncounted);
    report([a, a2, b, c, c2], seeded.searchTotal);
    console.log(`total time ${((Date.now() - started) / 1000).toFixed(0)} s`);
  } finally {
    for (const server of servers.reverse()) await server.close();
    await pool?.end();
    await queue.stop();
    await database.close();
    if (process.env.BENCH_KEEP === '1') console.log(`kept schema ${schema} (BENCH_KEEP=1)`);
    else await dropSchemas([schema, `${schema}_pgboss`]);
    await rm(dataDir, { recursive: true, force: true });
  }
}

interface Seeded {
  userId: number;
  key: string;
  sampleIds: number[];
  searchTotal: number;
}

/**
 * Users, one audio media item each, and 1,000,000 drops dealt round-robin to the users (so each
 * user's rows are spread over the table, as they are in life). Of each user's drops about 70% are
 * Sent, 15% Saved, 5% Scheduled, the rest Failed or Cancelled; 10% are named "…house…". The
 * benchmark user's Sent drops have counters (two shards each).
 */
async function seed(db: Awaited<ReturnType<typeof openDatabase>>['db']): Promise<Seeded> {
  const team = await db.insertInto('teams').values({ name: 'Bench' }).returning('id').executeTakeFirstOrThrow();
  const userIds: number[] = [];
  for (let i = 0; i < USERS; i++) {
    const user = await db
      .insertInto('users')
      .values({
        team_id: team.id,
        first_name: 'Bench',
        last_name: `User ${i}`,
        email: `bench-${i}@example.com`,
        roles: sql`ARRAY['User']::text[]` as never,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    userIds.push(user.id);
    await db
      .insertInto('media')
      .values({
        user_id: user.id,
        name: 'open-house',
        file_name: 'open-house.mp3',
        collection_name: 'audio',
        mime_type: 'audio/mpeg',
        size: 664_755,
        duration_seconds: 41.5,
        token: randomBytes(24).toString('base64url'),
        storage_key: `bench/${user.id}.mp3`,
      })
      .execute();
  }
  const userId = userIds[0] as number;
  const users = sql.raw(`ARRAY[${userIds.join(',')}]::bigint[]`);
  // One statement of a million rows: the per-row trigger that versions each user's drops would
  // rewrite its ten counters a million times. The versions start at 0 either way.
  await sql`ALTER TABLE voicemail_drops DISABLE TRIGGER voicemail_drops_version`.execute(db);
  // Drop g goes to users[(g - 1) % USERS] (round-robin), with that user's only media item.
  await sql`
    INSERT INTO voicemail_drops
      (user_id, provider, media_id, callback_number, name, description, status, reason, send_type,
       send_at, sending_at, sent_at, recipients, created_at, updated_at)
    SELECT u.id, 'Sandbox', m.id, '7272329117',
           CASE WHEN n % 10 = 3 THEN 'Open house follow-up ' || n
                WHEN n % 10 = 5 THEN 'Price drop ' || n
                ELSE 'Market update ' || n END,
           CASE WHEN n % 4 = 0 THEN 'Spring list' END,
           s.status,
           CASE WHEN s.status = 'Failed' THEN 'No recipients' END,
           CASE WHEN s.status = 'Saved' THEN 'Now' ELSE 'Future' END,
           CASE WHEN s.status <> 'Saved' THEN t.at + interval '1 hour' END,
           CASE WHEN s.status IN ('Sent', 'Failed', 'Cancelled') THEN t.at + interval '1 hour' END,
           CASE WHEN s.status IN ('Sent', 'Failed') THEN t.at + interval '1 hour 5 minutes' END,
           '[{"group": "Tags", "label": "Sphere", "value": 1}]'::jsonb,
           t.at, t.at
    FROM generate_series(1, ${TOTAL_DROPS}) AS g
    -- n numbers a user's own drops 1, 2, 3…: the mix below is the same for every user.
    CROSS JOIN LATERAL (SELECT (g - 1) / ${USERS} + 1 AS n) AS k
    CROSS JOIN LATERAL (SELECT (${users})[1 + (g - 1) % ${USERS}] AS id) AS u
    CROSS JOIN LATERAL (SELECT id FROM media WHERE media.user_id = u.id) AS m
    CROSS JOIN LATERAL (SELECT CASE
        WHEN n % 100 < 70 THEN 'Sent' WHEN n % 100 < 85 THEN 'Saved' WHEN n % 100 < 90 THEN 'Scheduled'
        WHEN n % 100 < 95 THEN 'Failed' ELSE 'Cancelled' END AS status) AS s
    CROSS JOIN LATERAL (SELECT timestamptz '2025-01-01' + g * interval '30 seconds' AS at) AS t
    ORDER BY g
  `.execute(db);
  await sql`ALTER TABLE voicemail_drops ENABLE TRIGGER voicemail_drops_version`.execute(db);
  // Counters of the benchmark user's sent drops: two shards each.
  await sql`
    INSERT INTO message_counters (message_kind, message_id, shard, user_id, sent, delivered, failed)
    SELECT 'voicemail_drop', d.id, shard, d.user_id, 5, 4, shard
    FROM voicemail_drops d CROSS JOIN generate_series(0, 1) AS shard
    WHERE d.user_id = ${userId} AND d.status = 'Sent'
  `.execute(db);
  await sql`VACUUM ANALYZE voicemail_drops`.execute(db);
  await sql`VACUUM ANALYZE message_counters`.execute(db);

  const { key } = await createApiKey(db, userId, 'bench');
  const sample = await sql<{ id: number }>`
    SELECT id FROM voicemail_drops WHERE user_id = ${userId} ORDER BY random() LIMIT 2000`.execute(db);
  const total = await sql<{ n: string }>`
    SELECT count(*) AS n FROM voicemail_drops
    WHERE user_id = ${userId} AND deleted_at IS NULL AND (status = 'Scheduled' OR name ILIKE '%house%')`.execute(db);
  return { userId, key, sampleIds: sample.rows.map((r) => Number(r.id)), searchTotal: Number(total.rows[0]?.n) };
}

/**
 * The baseline: the least a server can do to answer the read — TLS, one query by primary key
 * (the drop, its media item and its summed counters), the same JSON document.
 */
async function startBaseline(pool: pg.Pool, tls: { key: string; cert: string }, publicUrl: string): Promise<Server> {
  const sums = COUNTERS.map((name) => `sum(c.${name}) AS c_${name}`).join(', ');
  const text = `
    SELECT d.*, m.id AS m_id, m.name AS m_name, m.file_name AS m_file_name, m.collection_name AS m_collection_name,
           m.mime_type AS m_mime_type, m.size AS m_size, m.token AS m_token, m.created_at AS m_created_at,
           m.updated_at AS m_updated_at, m.deleted_at AS m_deleted_at, r.*
    FROM voicemail_drops d
    JOIN media m ON m.id = d.media_id
    LEFT JOIN LATERAL (SELECT ${sums} FROM message_counters c
                       WHERE c.message_kind = 'voicemail_drop' AND c.message_id = d.id) r ON true
    WHERE d.id = $1 AND d.deleted_at IS NULL`;
  const server = createServer({ key: tls.key, cert: tls.cert }, async (request, response) => {
    // /prepared/v3/…: the same query as a named (prepared) statement.
    const [, prepared, id] = /^(\/prepared)?\/v3\/voicemail_drops\/(\d+)$/.exec(request.url ?? '') ?? [];
    const { rows } = await (prepared ? pool.query({ name: 'read-drop', text, values: [Number(id)] }) : pool.query(text, [Number(id)]));
    const row = rows[0];
    if (!row) {
      response.writeHead(404).end();
      return;
    }
    const reporting: Record<string, unknown> = { date: null };
    for (const name of COUNTERS) reporting[name] = Number(row[`c_${name}`] ?? 0);
    const body = JSON.stringify({
      id: Number(row.id),
      provider: row.provider,
      media_id: Number(row.media_id),
      callback_number: row.callback_number,
      name: row.name,
      description: row.description,
      status: row.status,
      reason: row.reason,
      send_type: row.send_type,
      send_at: formatTimestamp(row.send_at),
      sending_at: formatTimestamp(row.sending_at),
      sent_at: formatTimestamp(row.sent_at),
      recipients: row.recipients,
      reporting,
      created_at: formatTimestamp(row.created_at),
      updated_at: formatTimestamp(row.updated_at),
      deleted_at: formatTimestamp(row.deleted_at),
      media: {
        id: Number(row.m_id),
        name: row.m_name,
        file_name: row.m_file_name,
        collection_name: row.m_collection_name,
        mime_type: row.m_mime_type,
        size: Number(row.m_size),
        readable_size: readableSize(Number(row.m_size)),
        full_url: publicFileUrl(publicUrl, { token: row.m_token, file_name: row.m_file_name }),
        download_url: `${publicUrl}/v3/media/${row.m_id}/download`,
        created_at: formatTimestamp(row.m_created_at),
        updated_at: formatTimestamp(row.m_updated_at),
        deleted_at: formatTimestamp(row.m_deleted_at),
      },
    });
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** Both servers answer, with the same document; the search finds what the seed put there. */
async function sanityCheck(hopper: string, baseline: string, headers: Record<string, string>, readPath: string, searchPath: string) {
  const get = async (base: string, path: string) => {
    const response = await fetchInsecure(`${base}${path}`, headers);
    if (response.status !== 200) throw new Error(`GET ${base}${path}: ${response.status} ${response.body}`);
    return JSON.parse(response.body);
  };
  const [fromHopper, fromBaseline] = await Promise.all([get(hopper, readPath), get(baseline, readPath)]);
  if (!isDeepStrictEqual(fromHopper, fromBaseline)) {
    throw new Error(`the baseline's document differs from Hopper's:\n${JSON.stringify(fromHopper)}\n${JSON.stringify(fromBaseline)}`);
  }
  const search = await get(hopper, searchPath);
  console.log(
    `search ${searchPath.split('?')[1]}: ${search.meta.total} of the user's 100,000 drops match, ${search.data.length} on page one`,
  );
}

/** One HTTPS GET that accepts the self-signed certificate. */
async function fetchInsecure(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const { request } = await import('node:https');
  return new Promise((resolve, reject) => {
    const req = request(url, { headers, rejectUnauthorized: false }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => {
        body += chunk;
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function explainSearch(db: Awaited<ReturnType<typeof openDatabase>>['db'], userId: number) {
  const { selectDrops } = await import('../src/voicemail/drops.ts');
  const base = selectDrops(db)
    .where('msg.user_id', '=', userId)
    .where((eb: any) => eb.or([eb('msg.status', '=', 'Scheduled'), sql`msg.name ILIKE ${'%house%'}`]));
  for (const [label, query] of [
    ['page', base.orderBy('msg.id').limit(15)],
    ['count', base.clearSelect().select(sql`count(*)`.as('n'))],
  ] as const) {
    const compiled = query.compile();
    const plan = await sql<{
      'QUERY PLAN': string;
    }>`EXPLAIN (ANALYZE, BUFFERS) ${sql.raw(inline(compiled.sql, compiled.parameters))}`.execute(db);
    console.log(`\n-- ${label}\n${plan.rows.map((r) => r['QUERY PLAN']).join('\n')}`);
  }
}

function inline(text: string, parameters: readonly unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, n) => {
    const value = parameters[Number(n) - 1];
    return typeof value === 'number' ? String(value) : `'${String(value).replaceAll("'", "''")}'`;
  });
}

function report(results: LoadResult[], searchTotal: number) {
  console.log('');
  const columns = ['req/s', 'p50 ms', 'p99 ms', 'requests', 'node µs/req', 'pg µs/req'];
  console.log(`${'run'.padEnd(28)}${columns.map((c) => c.padStart(12)).join('')}`);
  for (const r of results) {
    const values = [r.requestsPerSecond.toFixed(0), r.p50.toFixed(1), r.p99.toFixed(1), String(r.total)];
    values.push(r.cpu ? r.cpu.server.toFixed(0) : '-', r.cpu ? r.cpu.postgres.toFixed(0) : '-');
    console.log(`${r.label.padEnd(28)}${values.map((v) => v.padStart(12)).join('')}`);
  }
  const [a, a2, b, c, c2] = results as [LoadResult, LoadResult, LoadResult, LoadResult, LoadResult];
  const ratio = b.requestsPerSecond / a.requestsPerSecond;
  console.log('');
  console.log(`read b/a = ${ratio.toFixed(2)} (target ≥ 0.6): ${ratio >= 0.6 ? 'PASS' : 'MISS'}`);
  console.log(`   (b/a' = ${(b.requestsPerSecond / a2.requestsPerSecond).toFixed(2)} against a baseline that prepares its statement)`);
  console.log(`search p50 = ${c.p50.toFixed(1)} ms over ${searchTotal} matches (target ≤ 20 ms): ${c.p50 <= 20 ? 'PASS' : 'MISS'}`);
  console.log(`   (p50 = ${c2.p50.toFixed(1)} ms when every request has new filters, so each total is counted)`);
  console.log(`(${CONNECTIONS} connections, ${DURATION} s per run after ${WARM_UP} s of warm-up; autocannon in a child process)`);
}

/** CPU time of every PostgreSQL process, in microseconds by pid, from /proc (100 ticks a second). */
async function postgresCpu(): Promise<Map<number, number>> {
  const usage = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if ((await readFile(`/proc/${entry}/comm`, 'utf8')).trim() !== 'postgres') continue;
      const fields = (await readFile(`/proc/${entry}/stat`, 'utf8')).replace(/^.*\) /, '').split(' ');
      usage.set(Number(entry), (Number(fields[11]) + Number(fields[12])) * 10_000);
    } catch {
      // The process ended meanwhile.
    }
  }
  return usage;
}

function cpuSince(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, used] of after) total += used - (before.get(pid) ?? 0);
  return total;
}

async function dropSchemas(schemas: string[]) {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    for (const name of schemas) await client.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
  } finally {
    await client.end();
  }
}
