import assert from 'node:assert/strict';
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
 * 20 ms until the import answers. Every read must answer 200, and two measures judge the wait:
 *
 * - the longest turn of the event loop in this thread's CPU time (between two ticks of a 1 ms
 *   timer), what the import does at once, which the machine's load hardly changes: under 250 ms.
 *   A 64 KB slice is 2–3 ms, a PGlite batch about 25 ms, a major GC up to some 90 ms; the whole
 *   file parsed at once was one turn of 1.2 s on this machine.
 * - each read's time on the clock: under 100 ms (the issue's target) plus what the machine adds by
 *   itself, the slowest of 50 of the same reads before the import starts, in the same run. On
 *   PGlite a read also waits for the import's transaction on the one connection (a batch of about
 *   25 ms of CPU, for each of its statements): there the limit is 250 ms plus the same. The clock
 *   is judged only on a machine quiet enough for it (those 50 reads all under 50 ms, as on CI,
 *   where this file runs with few neighbours): on a loaded one the OS's scheduling alone takes
 *   hundreds of milliseconds, and a fixed limit would judge the neighbours, not the import.
 */
const ROWS = 50_000;
const LIMIT_MS = usingPostgres ? 100 : 250;
const QUIET_MS = 50;
const TURN_CPU_MS = 250;

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
    const reads: { url: string; ms: number; status: number }[] = [];
    const read = async (url: string, key?: string) => {
      const at = performance.now();
      const reply = await fetch(`${base}${url}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
      await reply.arrayBuffer();
      reads.push({ url, ms: performance.now() - at, status: reply.status });
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
    reads.length = 0;

    let longestTurn = 0;
    let cpu = process.threadCpuUsage();
    const ticks = setInterval(() => {
      const { user, system } = process.threadCpuUsage(cpu);
      longestTurn = Math.max(longestTurn, (user + system) / 1000);
      cpu = process.threadCpuUsage();
    }, 1);
    let done = false;
    const started = performance.now();
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
    assert.equal(imported.status, 200, JSON.stringify(imported.body).slice(0, 500));
    assert.deepEqual({ created: imported.body.created, refused: imported.body.refused.length }, { created: ROWS, refused: 0 });

    const slowest = reads.toSorted((a, b) => b.ms - a.ms);
    const median = slowest[reads.length >> 1]?.ms ?? 0;
    const summary =
      `${reads.length} reads during the ${Math.round(took)} ms import (${usingPostgres ? 'PostgreSQL' : 'PGlite'}): ` +
      `median ${Math.round(median)} ms, slowest ${slowest
        .slice(0, 3)
        .map((r) => `${r.url} ${Math.round(r.ms)} ms`)
        .join(', ')}; the same reads before it: slowest ${Math.round(floor)} ms; ` +
      `the longest turn of the event loop: ${Math.round(longestTurn)} ms of CPU`;
    assert.ok(reads.length >= 50, `at least 50 reads: ${summary}`);
    assert.deepEqual(
      reads.filter((r) => r.status !== 200),
      [],
      summary,
    );
    assert.ok(longestTurn < TURN_CPU_MS, summary);
    if (floor < QUIET_MS) assert.ok((slowest[0]?.ms ?? 0) < LIMIT_MS + floor, summary);
    else context.diagnostic(`the machine is too loaded to judge the reads by the clock: ${summary}`);
  });
});
