import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { setTimeout } from 'node:timers/promises';
import { asKey } from '../support/client.ts';
import { type Actor, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp, usingPostgres } from '../support/test-app.ts';

/**
 * Finding 5 of issue 36: a 20 MB import was parsed whole on the event loop (csv-parse's sync
 * parser), so /health answered 503 after 4 s and every other tenant waited as long. Here one user
 * imports a 20 MB CSV (50,000 contacts, a Google-style export with columns Hopper ignores) over
 * HTTP while another user reads their contacts and /health from the same process, two reads every
 * 20 ms until the import answers. Every read must answer 200, and three measures judge the wait:
 *
 * - the longest turn of the event loop in this thread's CPU time (between two ticks of a 1 ms
 *   timer), what the import does at once, which the machine's load hardly changes: under 150 ms,
 *   plus what three fresh copies of the file cost on this machine (freshCopyMs).
 *   A 64 KB slice is 2–3 ms, a PGlite batch 20–30 ms (its transaction runs in one turn), a major
 *   GC some tens of milliseconds: the longest measured were 42–60 ms on PGlite (48–82 ms before
 *   the batches got cheaper) and 28–39 ms on PostgreSQL; the whole file parsed at once was one
 *   turn of 1.2 s on this machine.
 * - on PGlite, each read's time less what the machine's load added to it: the time this thread
 *   stood ready to run while the OS ran other processes, and the time it slept waiting for this
 *   process's other threads (V8's collector) while they stood ready to run (Linux's schedstat).
 *   Everything a read waits for there runs on this thread — the import's transactions on the one
 *   connection every request shares, its checks, the reads themselves — so this is the read's time
 *   on a quiet machine, and it is judged on every run, instead of the clock: under 100 ms (the
 *   issue's target) plus the slowest of 50 of the same reads before the import, measured the same
 *   way (a first request's compiling). A batch now takes the connection only in a pause of the
 *   requests' use of it (db/one-connection.ts), so a read waits for one batch at most: slowest
 *   42–59 ms at loads of 5–15. Before, a read could find a batch before each of its statements, and
 *   each batch's address look-up read all the owner's contacts: slowest 69–84 ms, under the target
 *   already by this measure; only the clock, on a loaded machine, found more.
 * - elsewhere (PostgreSQL, or no schedstat), each read's time on the clock: under 100 ms plus what
 *   the machine adds by itself, the slowest of those 50 reads, judged only on a machine quiet
 *   enough for it (those 50 reads all under 50 ms, and this thread on the run queue for less than
 *   a tenth of the import's time, as on CI, where this file runs with few neighbours). On a loaded
 *   one the OS's scheduling alone takes hundreds of milliseconds, and a fixed limit would judge the
 *   neighbours, not the import: on PGlite, reads of 50 ms before the import and 187 ms during it
 *   at a load of 12 (49 ms by the measure above); 34 ms and 135 ms with a quarter of the import's
 *   time on the run queue (48 ms). On PostgreSQL a read also waits for the database's processes,
 *   whose time on the run queue this process does not see.
 */
const ROWS = 50_000;
const LIMIT_MS = 100;
const QUIET_MS = 50;
const QUEUED_SHARE = 0.1;
const TURN_CPU_MS = 150;

/**
 * What this machine charges, in this thread's CPU, for copying the file into memory touched for
 * the first time — as Fastify collects a request's body (Buffer.concat of its chunks) and as a
 * decoder writes its text: 3–5 ms on a quiet machine, 75–82 ms on one (2026-11-29) whose page
 * faults made every fresh copy of 20 MB that slow, where the import's longest turn was 168–277 ms
 * with nothing else changed: about three such copies more than on a quiet machine, which the
 * turn's limit allows on top of TURN_CPU_MS. Parsing the whole file at once still fails it.
 */
function freshCopyMs(bytes: number): number {
  const chunks = Array.from({ length: Math.ceil(bytes / 65_536) }, () => Buffer.alloc(65_536, 97));
  const cpu = process.threadCpuUsage();
  Buffer.concat(chunks);
  const { user, system } = process.threadCpuUsage(cpu);
  return (user + system) / 1000;
}

/**
 * This process's time on the OS's run queue so far, in milliseconds: its main thread's, and all its
 * threads' (Linux's schedstat); undefined where there is none.
 */
function runQueue(): { main: number; all: number } | undefined {
  const queued = (task: string) => Number(readFileSync(`/proc/self/task/${task}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  try {
    let all = 0;
    for (const task of readdirSync('/proc/self/task')) {
      try {
        all += queued(task);
      } catch {
        // A thread that ended meanwhile.
      }
    }
    return { main: queued(String(process.pid)), all };
  } catch {
    return undefined;
  }
}

function twentyMegabytes(): Buffer {
  const header = 'Given Name,Family Name,E-mail 1 - Value,Phone 1 - Value,Labels,Notes,Organization 1 - Name,Address 1 - Formatted\n';
  const lines: string[] = [header];
  for (let i = 0; i < ROWS; i++) {
    const notes = `"Met at the fair, stand ${i}; wants a call back about ""the offer"". ${'Lorem ipsum dolor sit amet. '.repeat(7)}"`;
    lines.push(
      `Ann${i},Example${i},ann${i}@stall.example,+1 727 555 ${String(i % 10_000).padStart(4, '0')},Customers ::: * myContacts,${notes},Example Ltd ${i},"${i} Main Street\nSpringfield"\n`,
    );
  }
  return Buffer.from(lines.join(''));
}

describe('one import does not stall every tenant (issue 36, finding 5)', () => {
  let t: TestApp;
  let importer: Actor;
  let other: Actor;
  let base: string;

  before(async () => {
    t = await startTestApp();
    importer = await createUser(t, 'User');
    other = await createUser(t, 'User');
    const seeded = await asKey(t.app, other.key).post(`/v3/users/${other.id}/contacts/import`, 'email,first_name\nbo@other.example,Bo\n', {
      'content-type': 'text/csv',
    });
    assert.equal(seeded.status, 200, seeded.raw);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  });
  after(() => t.close());

  test(`another user's reads and /health answer within ${LIMIT_MS} ms (plus the machine's own) while a 20 MB CSV is imported`, async (context) => {
    const file = twentyMegabytes();
    assert.ok(file.length > 19 * 1024 * 1024 && file.length < 20 * 1024 * 1024, `${file.length} bytes`);
    // `own`: the read's time less what the machine's load added to it (see the comment at the top).
    const reads: { url: string; ms: number; own: number | undefined; status: number }[] = [];
    const read = async (url: string, key?: string) => {
      const at = performance.now();
      const queued = runQueue();
      const cpu = process.threadCpuUsage();
      const reply = await fetch(`${base}${url}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
      await reply.arrayBuffer();
      const ms = performance.now() - at;
      const { user, system } = process.threadCpuUsage(cpu);
      const after = queued && runQueue();
      let own: number | undefined;
      if (queued && after) {
        const slept = ms - (after.main - queued.main) - (user + system) / 1000;
        own = ms - (after.main - queued.main) - Math.min(Math.max(slept, 0), after.all - queued.all - (after.main - queued.main));
      }
      reads.push({ url, ms, own, status: reply.status });
    };
    // Another tenant at work: two reads every 20 ms or so (a loop without a pause would take the
    // import's CPU, the import's time growing with it).
    const readWhile = async (going: () => boolean) => {
      while (going()) {
        await read(`/v3/users/${other.id}/contacts?per_page=50`, other.key);
        await read('/health');
        await setTimeout(20);
      }
    };
    await readWhile(() => reads.length < 50);
    const floor = Math.max(...reads.map((r) => r.ms));
    const ownFloor = Math.max(...reads.map((r) => r.own ?? 0));
    reads.length = 0;

    const turnLimitMs = TURN_CPU_MS + 3 * freshCopyMs(file.length);
    let longestTurn = 0;
    let cpu = process.threadCpuUsage();
    const ticks = setInterval(() => {
      const { user, system } = process.threadCpuUsage(cpu);
      longestTurn = Math.max(longestTurn, (user + system) / 1000);
      cpu = process.threadCpuUsage();
    }, 1);
    let done = false;
    const started = performance.now();
    const queuedBefore = runQueue();
    const importing = fetch(`${base}/v3/users/${importer.id}/contacts/import`, {
      method: 'POST',
      headers: { authorization: `Bearer ${importer.key}`, 'content-type': 'text/csv' },
      body: file,
    }).then(async (reply) => {
      done = true;
      return { status: reply.status, body: (await reply.json()) as { created: number; refused: unknown[] } };
    });
    await readWhile(() => !done);
    clearInterval(ticks);
    const imported = await importing;
    const took = performance.now() - started;
    const queuedAfter = queuedBefore && runQueue();
    // The share of the import's time this thread stood ready to run while the OS ran others.
    const queuedShare = queuedBefore && queuedAfter ? (queuedAfter.main - queuedBefore.main) / took : 0;
    assert.equal(imported.status, 200, JSON.stringify(imported.body).slice(0, 500));
    assert.deepEqual({ created: imported.body.created, refused: imported.body.refused.length }, { created: ROWS, refused: 0 });

    const slowest = reads.toSorted((a, b) => b.ms - a.ms);
    const median = slowest[reads.length >> 1]?.ms ?? 0;
    const judgeOwn = !usingPostgres && reads.every((r) => r.own !== undefined);
    const slowestOwn = reads.toSorted((a, b) => (b.own ?? 0) - (a.own ?? 0));
    const summary =
      `${reads.length} reads during the ${Math.round(took)} ms import (${usingPostgres ? 'PostgreSQL' : 'PGlite'}): ` +
      `median ${Math.round(median)} ms, slowest ${slowest
        .slice(0, 3)
        .map((r) => `${r.url} ${Math.round(r.ms)} ms`)
        .join(', ')}; the same reads before it: slowest ${Math.round(floor)} ms; ` +
      (judgeOwn
        ? `less what the load added: slowest ${slowestOwn
            .slice(0, 3)
            .map((r) => `${r.url} ${Math.round(r.own ?? 0)} ms`)
            .join(', ')}, before it ${Math.round(ownFloor)} ms; `
        : '') +
      `the longest turn of the event loop: ${Math.round(longestTurn)} ms of CPU (limit ${Math.round(turnLimitMs)} ms)`;
    assert.ok(reads.length >= 50, `at least 50 reads: ${summary}`);
    assert.deepEqual(
      reads.filter((r) => r.status !== 200),
      [],
      summary,
    );
    assert.ok(longestTurn < turnLimitMs, summary);
    if (judgeOwn) {
      assert.ok((slowestOwn[0]?.own ?? 0) < LIMIT_MS + ownFloor, summary);
      context.diagnostic(summary);
    } else if (floor < QUIET_MS && queuedShare < QUEUED_SHARE) assert.ok((slowest[0]?.ms ?? 0) < LIMIT_MS + floor, summary);
    else {
      const queued = `${Math.round(queuedShare * 100)}% of the import's time on the run queue`;
      context.diagnostic(`the machine is too loaded to judge the reads by the clock (${queued}): ${summary}`);
    }
  });
});
