import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type SqlBool, sql } from 'kysely';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { type Db, openDatabase } from '../src/db/database.ts';
import { precompiled } from '../src/db/precompiled.ts';
import type { MediaRow } from '../src/db/schema.ts';
import { CountCache, runSearch } from '../src/db/search.ts';
import { findDrop, pageOfDrops } from '../src/messages/message-tables.ts';
import { COUNTERS, type Reporting } from '../src/messages/reporting.ts';
import { insertAudio } from './seed-drops.ts';

/**
 * `node bench/nested-reads.ts`: the read of a voicemail drop with its media item, counters and
 * owner, two ways (docs/decisions.md, "Nested reads"):
 *
 * - json: each nested row as one JSON object made by PostgreSQL (Kysely's `jsonObjectFrom` and
 *   `jsonBuildObject`), parsed by the driver, the media item's timestamps revived into Dates —
 *   what Hopper runs (messages/message-tables.ts);
 * - flat: every nested value a column of its own under a prefix (`m__size`), taken apart in
 *   JavaScript — what Hopper ran before.
 *
 * Each is run by id (the read of every GET, PUT and DELETE) and for search pages of 15 and 100
 * drops (the page's ids from the drops table, then its rows by id with the joined read; the total
 * is reused, as between requests), in turns, and reported in microseconds per read, the median of
 * five rounds.
 * On PostgreSQL (DATABASE_URL, default the local server; a schema made and dropped) and on PGlite.
 */
const ROUNDS = 5;
const READS = Number(process.env.BENCH_READS ?? 2000);
const DROPS = 2000;

async function seed(db: Db): Promise<{ ownerId: number; ids: number[] }> {
  const user = await db
    .insertInto('users')
    .values({
      first_name: 'Bench',
      last_name: 'Nested',
      email: 'nested@bench.example',
      roles: ['User'],
      created_at: new Date(),
      updated_at: new Date(),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const media = await insertAudio(db, user.id);
  await sql`
    INSERT INTO voicemail_drops (user_id, provider, media_id, callback_number, name, status, recipients, created_at, updated_at)
    SELECT ${user.id}, 'Sandbox', ${media.id}, '7272329117', 'Market update ' || n, 'Sent', '[]'::jsonb, now(), now()
    FROM generate_series(1, ${DROPS}) AS n`.execute(db);
  await sql`
    INSERT INTO message_counters (message_kind, message_id, shard, user_id, sent, delivered, failed)
    SELECT 'voicemail_drop', d.id, shard, d.user_id, 5, 4, shard FROM voicemail_drops d CROSS JOIN generate_series(0, 1) AS shard`.execute(
    db,
  );
  await sql`ANALYZE`.execute(db);
  const { rows } = await sql<{ id: string }>`SELECT id FROM voicemail_drops ORDER BY id`.execute(db);
  return { ownerId: Number(user.id), ids: rows.map((r) => Number(r.id)) };
}

const MEDIA_COLUMNS = [
  'id',
  'user_id',
  'name',
  'file_name',
  'collection_name',
  'mime_type',
  'size',
  'duration_seconds',
  'token',
  'storage_key',
  'created_at',
  'updated_at',
  'deleted_at',
] as const;

/** The flat read Hopper had before: every nested value a column of its own, named `<prefix>__<column>`. */
function flatDrops(db: Db) {
  return db
    .selectFrom('voicemail_drops as msg')
    .innerJoin('users as u', 'u.id', 'msg.user_id')
    .innerJoin('media as m', 'm.id', 'msg.media_id')
    .leftJoinLateral(
      (eb) =>
        eb
          .selectFrom('message_counters as c')
          .select(COUNTERS.map((name) => sql<string | null>`sum(${sql.ref(`c.${name}`)})`.as(name)))
          .where('c.message_kind', '=', 'voicemail_drop')
          .whereRef('c.message_id', '=', 'msg.id')
          .as('r'),
      (join) => join.onTrue(),
    )
    .selectAll('msg')
    .select(COUNTERS.map((name) => sql.ref(`r.${name}`).as(`c__${name}`)))
    .select(['u.team_id as o__team_id', 'u.roles as o__roles'])
    .select(MEDIA_COLUMNS.map((column) => sql.ref(`m.${column}`).as(`m__${column}`)))
    .where('msg.deleted_at', 'is', null)
    .where('u.deleted_at', 'is', null);
}
const flatById = precompiled<[number], object>(1, (db, id) => flatDrops(db).where('msg.id', '=', id));
const flatByIds = precompiled<[number[]], object>(1, (db, ids) => flatDrops(db).where(sql<SqlBool>`msg.id = any(${ids}::bigint[])`));

/** Its taking apart: the split of a statement's column list worked out once, then each row's values put in place. */
let lastSplit: { keys: string[]; prefixes: string[]; names: string[] } | undefined;
function splitFlat(joined: object) {
  const keys = Object.keys(joined);
  if (!lastSplit || lastSplit.keys.length !== keys.length || !lastSplit.keys.every((key, i) => key === keys[i])) {
    const prefixes: string[] = [];
    const names: string[] = [];
    for (const key of keys) {
      const cut = key.indexOf('__');
      prefixes.push(cut < 0 ? '' : key.slice(0, cut));
      names.push(cut < 0 ? key : key.slice(cut + 2));
    }
    lastSplit = { keys, prefixes, names };
  }
  const { prefixes, names } = lastSplit;
  const values = joined as Record<string, unknown>;
  const row: Record<string, unknown> = {};
  const extras: Record<string, Record<string, unknown>> = { c: {}, o: {}, m: {} };
  for (let i = 0; i < keys.length; i++) {
    const prefix = prefixes[i] as string;
    if (prefix === '') row[names[i] as string] = values[keys[i] as string];
    else (extras[prefix] as Record<string, unknown>)[names[i] as string] = values[keys[i] as string];
  }
  const reporting = { date: null } as Reporting;
  for (const name of COUNTERS) reporting[name] = Number(extras.c?.[name] ?? 0);
  return { row, reporting, owner: { id: row.user_id, ...extras.o }, media: extras.m as unknown as MediaRow };
}

/** A search page whose rows are read the flat way: the same statements as pageOfDrops but for the rows' read. */
async function flatPage(db: Db, ownerId: number, params: { page: number; per_page: number }, totals: CountCache) {
  const live = db.selectFrom('voicemail_drops as msg').selectAll().where('msg.deleted_at', 'is', null);
  const version = sql<
    string | null
  >`(SELECT sum(version) FROM collection_versions WHERE collection = 'voicemail_drops' AND user_id = ${ownerId})`;
  const page = await runSearch<object>(live, {}, params, 'msg.id', {
    counts: { db, cache: totals, key: `voicemail_drops ${ownerId}`, version },
    rowsByIds: (ids) => flatByIds(db, ids),
    owner: { column: 'msg.user_id', id: ownerId },
  });
  return page.rows.map(splitFlat);
}

async function timed(run: () => Promise<unknown>, count: number): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < count; i++) await run();
  return ((performance.now() - started) * 1000) / count;
}

async function measure(label: string, db: Db, ownerId: number, ids: number[]): Promise<void> {
  const one = () => ids[Math.floor(Math.random() * ids.length)] as number;
  const page = (perPage: number) => ({ page: 1 + Math.floor(Math.random() * (ids.length / perPage - 1)), per_page: perPage });
  const flatTotals = new CountCache();
  const jsonTotals = new CountCache();
  const cases = {
    'by id': {
      flat: async () => (await flatById(db, one())).map(splitFlat),
      json: () => findDrop(db, one()),
    },
    'page of 15': {
      flat: () => flatPage(db, ownerId, page(15), flatTotals),
      json: () => pageOfDrops(db, ownerId, page(15), {}, jsonTotals),
    },
    'page of 100': {
      flat: () => flatPage(db, ownerId, page(100), flatTotals),
      json: () => pageOfDrops(db, ownerId, page(100), {}, jsonTotals),
    },
  };
  for (const [name, forms] of Object.entries(cases)) {
    const reads = name === 'by id' ? READS : Math.ceil(READS / 10);
    await timed(forms.flat, 200);
    await timed(forms.json, 200);
    const flat: number[] = [];
    const json: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      flat.push(await timed(forms.flat, reads));
      json.push(await timed(forms.json, reads));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
    const f = median(flat);
    const j = median(json);
    console.log(
      `${label.padEnd(10)} ${name.padEnd(12)} flat ${f.toFixed(0).padStart(6)} µs   json ${j.toFixed(0).padStart(6)} µs   json/flat ${(j / f).toFixed(2)}`,
    );
  }
}

const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const schema = `bench_nested_${randomBytes(4).toString('hex')}`;
const pgDir = await mkdtemp(join(tmpdir(), 'hopper-bench-nested-'));
try {
  const postgres = await openDatabase(
    loadConfig({ DATA_DIR: pgDir, DATABASE_URL: databaseUrl, DATABASE_SCHEMA: schema, LOG_LEVEL: 'silent' }),
  );
  try {
    const { ownerId, ids } = await seed(postgres.db);
    await measure('PostgreSQL', postgres.db, ownerId, ids);
  } finally {
    await postgres.close();
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  }
  const pglite = await openDatabase(loadConfig({ DATA_DIR: pgDir, LOG_LEVEL: 'silent' }));
  try {
    const { ownerId, ids } = await seed(pglite.db);
    await measure('PGlite', pglite.db, ownerId, ids);
  } finally {
    await pglite.close();
  }
} finally {
  await rm(pgDir, { recursive: true, force: true });
}
