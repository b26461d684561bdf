import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { openJobQueue } from '../src/db/job-queue.ts';
import { COUNTERS } from '../src/messages/reporting.ts';
import { loadTls } from '../src/tls.ts';

/**
 * `npm run bench:events`: SendGrid Event Webhook throughput. On PostgreSQL (DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/postgres) in a fresh schema dropped at the end, it seeds one
 * sent templated email with BENCH_DELIVERIES (100,000) deliveries straight in SQL, starts Hopper
 * in-process over real HTTPS, and posts BENCH_BATCHES (100) signed batches of 1,000 events —
 * delivered and open mixed, one batch in twenty made of events already posted (SendGrid's retries)
 * — from BENCH_POSTERS (4) concurrent connections. It prints events/s against the 20,000/s target
 * and checks that the message's counters and delivery states are exactly what the unique events say.
 */
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 100_000);
const BATCHES = Number(process.env.BENCH_BATCHES ?? 100);
const BATCH_SIZE = 1000;
const POSTERS = Number(process.env.BENCH_POSTERS ?? 4);
const TARGET_PER_SECOND = 20_000;
/** One batch in this many is a repost of events already sent. */
const DUPLICATE_EVERY = 20;

const schema = `bench_events_${randomBytes(4).toString('hex')}`;
const dataDir = await mkdtemp(join(tmpdir(), 'hopper-bench-events-'));
const keys = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const config = loadConfig({
  DATABASE_URL,
  DATABASE_SCHEMA: schema,
  DATA_DIR: dataDir,
  HOST: '127.0.0.1',
  PORT: '0',
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
  SENDGRID_WEBHOOK_PUBLIC_KEY: keys.publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
});
const database = await openDatabase(config);
const queue = await openJobQueue(database, config);
const { db } = database;
let app: Awaited<ReturnType<typeof buildApp>> | undefined;
let failed = false;

try {
  console.log(`schema ${schema}: seeding ${DELIVERIES.toLocaleString('en')} deliveries…`);
  const message = await seed();

  const batches = makeBatches(message.deliveries);
  const expected = { delivered: 0, open: 0 };
  const unique = new Set<string>();
  for (const batch of batches) {
    for (const event of batch) {
      if (unique.has(event.sg_event_id)) continue;
      unique.add(event.sg_event_id);
      expected[event.event as 'delivered' | 'open']++;
    }
  }
  const posted = batches.reduce((n, b) => n + b.length, 0);

  const tls = await loadTls(config);
  app = await buildApp(config, { database, queue, https: { key: tls.key, cert: tls.cert } });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as { port: number };
  const agent = new Agent({ keepAlive: true, maxSockets: POSTERS, ca: tls.cert });
  // Signing is the sender's work: done before the clock starts (timestamps stay well within the allowed skew).
  const bodies = batches.map((batch) => signed(JSON.stringify(batch)));
  const bytes = bodies.reduce((n, b) => n + b.body.length, 0);

  console.log(
    `posting ${posted.toLocaleString('en')} events (${unique.size.toLocaleString('en')} unique) in ${batches.length} batches of ${BATCH_SIZE}, ` +
      `${(bytes / batches.length / 1024).toFixed(0)} KB each, ${POSTERS} at a time, to https://127.0.0.1:${port}/v3/webhooks/sendgrid`,
  );
  const totals = { recorded: 0, duplicates: 0, ignored: 0 };
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: POSTERS }, async () => {
      while (next < bodies.length) {
        const item = bodies[next++]!;
        const sentAt = performance.now();
        const reply = await post(agent, port, item);
        latencies.push(performance.now() - sentAt);
        if (reply.status !== 200) throw new Error(`HTTP ${reply.status}: ${reply.body.slice(0, 300)}`);
        const summary = JSON.parse(reply.body) as typeof totals;
        totals.recorded += summary.recorded;
        totals.duplicates += summary.duplicates;
        totals.ignored += summary.ignored;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  await app.close();
  app = undefined;

  const perSecond = posted / seconds;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(0);
  console.log(
    `${posted.toLocaleString('en')} events in ${seconds.toFixed(2)} s: ${Math.round(perSecond).toLocaleString('en')} events/s ` +
      `(target ${TARGET_PER_SECOND.toLocaleString('en')}/s) ${perSecond >= TARGET_PER_SECOND ? 'PASS' : 'MISS'}`,
  );
  console.log(`batch latency ms: p50 ${at(0.5)}, p90 ${at(0.9)}, p99 ${at(0.99)}, max ${at(1)}`);
  console.log(`answers: recorded ${totals.recorded}, duplicates ${totals.duplicates}, ignored ${totals.ignored}`);

  const counters = await countersOf(message.id);
  const states = await sql<{ n: string }>`
    SELECT count(*) AS n FROM deliveries
    WHERE message_kind = 'templated_email' AND message_id = ${message.id} AND state = 'delivered'`.execute(db);
  const want: Record<string, number> = { ...Object.fromEntries(COUNTERS.map((c) => [c, 0])), sent: DELIVERIES, ...expected };
  const checks: [string, number, number][] = [
    ...COUNTERS.map((c): [string, number, number] => [`reporting.${c}`, counters[c] ?? 0, want[c] ?? 0]),
    ['deliveries in state delivered', Number(states.rows[0]?.n), expected.delivered],
    ['events recorded', totals.recorded, unique.size],
    ['duplicates answered', totals.duplicates, posted - unique.size],
  ];
  const wrong = checks.filter(([, got, wanted]) => got !== wanted);
  for (const [what, got, wanted] of wrong) console.log(`  ${what}: ${got}, expected ${wanted}`);
  console.log(
    wrong.length === 0
      ? `counters OK: delivered ${expected.delivered}, open ${expected.open}, sent ${DELIVERIES}, every other counter 0`
      : 'counters MISMATCH',
  );
  failed = wrong.length > 0;
} catch (error) {
  console.error(error);
  failed = true;
} finally {
  await app?.close();
  await queue.stop();
  await sql`DROP SCHEMA IF EXISTS ${sql.id(schema)} CASCADE`.execute(db);
  await sql`DROP SCHEMA IF EXISTS ${sql.id(`${schema}_pgboss`)} CASCADE`.execute(db);
  await database.close();
  await rm(dataDir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);

/** A user, their contacts, one Sent templated email and a `sent` delivery per contact, as the engine leaves them. */
async function seed() {
  const user = await sql<{ id: number }>`
    INSERT INTO users (first_name, last_name, email, roles) VALUES ('Bench', 'Sender', 'bench@example.com', ARRAY['User'])
    RETURNING id`.execute(db);
  const userId = user.rows[0]!.id;
  await sql`
    INSERT INTO contacts (user_id, first_name, email)
    SELECT ${userId}, 'Pat', 'contact' || g || '@example.com' FROM generate_series(1, ${DELIVERIES}::integer) g`.execute(db);
  const email = await sql<{ id: number }>`
    INSERT INTO templated_emails (user_id, subject, greeting_with_first_name, greeting_without_first_name, body, text,
                                  status, send_at, sending_at, sent_at, resolved_at)
    VALUES (${userId}, 'New listings', 'Hi {{first_name}},', 'Hi,', '<p>New listings.</p>', 'New listings.',
            'Sent', now(), now(), now(), now())
    RETURNING id`.execute(db);
  const messageId = email.rows[0]!.id;
  await sql`
    INSERT INTO deliveries (user_id, message_kind, message_id, contact_id, address, state, attempts, provider_message_id, sent_at)
    SELECT ${userId}, 'templated_email', ${messageId}, c.id, c.email, 'sent', 1,
           '<templated_email-' || ${messageId} || '.' || c.id || '@localhost>', now()
    FROM contacts c WHERE c.user_id = ${userId} ORDER BY c.id`.execute(db);
  await sql`
    INSERT INTO message_counters (message_kind, message_id, shard, user_id, sent)
    VALUES ('templated_email', ${messageId}, 0, ${userId}, ${DELIVERIES})`.execute(db);
  await sql`ANALYZE`.execute(db);
  const deliveries = await sql<{ id: number; address: string }>`
    SELECT id, address FROM deliveries WHERE message_kind = 'templated_email' AND message_id = ${messageId} ORDER BY id`.execute(db);
  return { id: messageId, deliveries: deliveries.rows };
}

type SendgridEvent = Record<string, unknown> & { event: string; sg_event_id: string };

/**
 * The batches to post: unique events (a delivered for most deliveries, an open for some, shuffled
 * together as SendGrid's servers would interleave them) plus reposts of earlier events, shuffled in.
 */
function makeBatches(deliveries: { id: number; address: string }[]): SendgridEvent[][] {
  const random = seededRandom(42);
  const duplicateBatches = Math.floor(BATCHES / DUPLICATE_EVERY);
  const uniqueCount = (BATCHES - duplicateBatches) * BATCH_SIZE;
  const delivered = Math.min(deliveries.length, Math.round(uniqueCount * 0.7));
  const now = Math.floor(Date.now() / 1000);
  const events: SendgridEvent[] = [];
  for (let i = 0; i < uniqueCount; i++) {
    const isDelivered = i < delivered;
    const target = deliveries[isDelivered ? i : Math.floor(random() * deliveries.length)]!;
    events.push(event(target, isDelivered ? 'delivered' : 'open', now - Math.floor(random() * 600)));
  }
  shuffle(events, random);
  const batches: SendgridEvent[][] = [];
  for (let i = 0; i < events.length; i += BATCH_SIZE) batches.push(events.slice(i, i + BATCH_SIZE));
  for (let i = 0; i < duplicateBatches; i++) {
    batches.push(Array.from({ length: BATCH_SIZE }, () => events[Math.floor(random() * events.length)]!));
  }
  return shuffle(batches, random);
}

function event(delivery: { id: number; address: string }, name: string, timestamp: number): SendgridEvent {
  const sgEventId = randomBytes(16).toString('base64url');
  const common = {
    email: delivery.address,
    timestamp,
    event: name,
    sg_event_id: sgEventId,
    sg_message_id: `${randomBytes(11).toString('base64url')}.recvd-5f6d7b8c9-abcde-1-64A1B2C3-4.0`,
    'smtp-id': `<templated_email-1.${delivery.id}@localhost>`,
    category: [],
    hopper_delivery_id: String(delivery.id),
  };
  return name === 'open'
    ? { ...common, ip: '203.0.113.7', useragent: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36', sg_machine_open: false }
    : { ...common, ip: '198.51.100.2', response: '250 2.0.0 OK 1700000000 a1si123456qkb.1 - gsmtp', tls: 1 };
}

function signed(body: string) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = sign('sha256', Buffer.from(timestamp + body), { key: keys.privateKey, dsaEncoding: 'der' }).toString('base64');
  return { body: Buffer.from(body), timestamp, signature };
}

function post(agent: Agent, port: number, item: ReturnType<typeof signed>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/v3/webhooks/sendgrid',
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': item.body.length,
          'x-twilio-email-event-webhook-timestamp': item.timestamp,
          'x-twilio-email-event-webhook-signature': item.signature,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(item.body);
  });
}

async function countersOf(messageId: number): Promise<Record<string, number>> {
  const { rows } = await sql<Record<string, string>>`
    SELECT ${sql.join(COUNTERS.map((c) => sql`sum(${sql.ref(c)}) AS ${sql.ref(c)}`))}
    FROM message_counters WHERE message_kind = 'templated_email' AND message_id = ${messageId}`.execute(db);
  return Object.fromEntries(COUNTERS.map((c) => [c, Number(rows[0]?.[c] ?? 0)]));
}

function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}
