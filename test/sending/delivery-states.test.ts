import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import ts from 'typescript';
import { CLAIMABLE_STATES, DELIVERY_STATES, rankSql, stateList, stateRank } from '../../src/sending/delivery-states.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** The delivery states as written once (sending/delivery-states.ts), and as SQL sees them. */
describe('delivery states', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  /**
   * The generic plan of a statement taking the states as parameter $1 (`states`: how it uses it),
   * as a prepared statement gets after a few runs (db/prepared-statements.ts), with sequential scans
   * priced out so that any usable index is taken.
   */
  async function genericPlan(states: string): Promise<string> {
    return t.database.db.transaction().execute(async (trx) => {
      await sql`SET LOCAL enable_seqscan = off`.execute(trx);
      await sql`SET LOCAL plan_cache_mode = force_generic_plan`.execute(trx);
      await sql`PREPARE due_deliveries (text[]) AS SELECT id FROM deliveries
        WHERE message_kind = 'templated_email' AND message_id = 1 AND ${sql.raw(states)} AND next_attempt_at <= now()
        ORDER BY next_attempt_at, id LIMIT 100`.execute(trx);
      try {
        const { rows } = await sql<
          Record<string, unknown>
        >`EXPLAIN EXECUTE due_deliveries (${sql.lit(`{${CLAIMABLE_STATES.join(',')}}`)})`.execute(trx);
        return rows.map((row) => Object.values(row).join(' ')).join('\n');
      } finally {
        await sql`DEALLOCATE due_deliveries`.execute(trx);
      }
    });
  }

  test("a group rendered as literals keeps the claim's partial index usable by a generic plan; as a parameter it is not", async () => {
    const literals = await genericPlan(`state IN (${stateList(CLAIMABLE_STATES).compile(t.database.db).sql}) AND $1 IS NOT NULL`);
    assert.match(literals, /deliveries_claim_idx/);
    assert.doesNotMatch(await genericPlan('state = ANY ($1)'), /deliveries_claim_idx/);
  });

  test('the ranks in SQL are the ranks in TypeScript', async () => {
    const { rows } = await sql<{ state: string; rank: number }>`
      SELECT d.state, ${rankSql('d.state')} AS rank FROM unnest(${DELIVERY_STATES}::text[]) AS d(state)`.execute(t.database.db);
    assert.deepEqual(
      rows.map((r) => [r.state, Number(r.rank)]),
      DELIVERY_STATES.map((state) => [state, stateRank(state)]),
    );
  });
});

/**
 * Groups of delivery states written outside sending/delivery-states.ts, in `root`'s src/: an array
 * of two or more states and nothing else, or an SQL `IN ('…', '…')` of them. A single state is
 * just its name; a group is a decision, written once. The counters of `reporting` share names with
 * the states (sent, delivered, failed, dropped): an array that says it holds counters
 * (`satisfies …Counter[]`) is theirs, not a group of states.
 */
async function stateGroupsOutside(root: string): Promise<string[]> {
  const states = new Set<string>(DELIVERY_STATES);
  const allStates = (names: string[]) => names.length >= 2 && names.every((name) => states.has(name));
  const src = join(root, 'src');
  const found: string[] = [];
  for (const entry of await readdir(src, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    const file = relative(src, path);
    if (!entry.isFile() || !file.endsWith('.ts') || file === 'sending/delivery-states.ts' || file.startsWith('db/migrations/')) continue;
    const source = ts.createSourceFile(path, await readFile(path, 'utf8'), ts.ScriptTarget.Latest, true);
    const report = (node: ts.Node, group: string[]) =>
      found.push(`src/${file}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1} ${group.join(', ')}`);
    const visit = (node: ts.Node) => {
      const saysCounters = (array: ts.Node) => {
        let outer = array.parent;
        while (outer && (ts.isAsExpression(outer) || ts.isParenthesizedExpression(outer))) outer = outer.parent;
        return outer !== undefined && ts.isSatisfiesExpression(outer) && /\bCounter\[\]/.test(outer.type.getText(source));
      };
      if (ts.isArrayLiteralExpression(node) && node.elements.every(ts.isStringLiteralLike) && !saysCounters(node)) {
        const names = node.elements.map((element) => (element as ts.StringLiteralLike).text);
        if (allStates(names)) report(node, names);
      } else if (ts.isStringLiteralLike(node) || ts.isTemplateLiteralToken(node)) {
        for (const [, list = ''] of node.text.matchAll(/\bIN \(((?:\s*'[a-z_]+'\s*,?)+)\)/g)) {
          const names = [...list.matchAll(/'([a-z_]+)'/g)].map((m) => m[1] ?? '');
          if (allStates(names)) report(node, names);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

describe('delivery states written once', () => {
  test('no group of delivery states is written outside sending/delivery-states.ts', async () => {
    assert.deepEqual(await stateGroupsOutside(join(import.meta.dirname, '../..')), []);
  });

  test('a group written as an array or as an SQL list elsewhere is reported; other state machines are not', async () => {
    const root = await mkdtemp(join(tmpdir(), 'hopper-states-'));
    try {
      await mkdir(join(root, 'src/voicemail'), { recursive: true });
      await writeFile(
        join(root, 'src/voicemail/planted.ts'),
        [
          "export const a = (db) => db.selectFrom('deliveries').where('state', 'in', ['sent', 'sending']);",
          "export const b = sql`SELECT id FROM deliveries WHERE state IN ('failed', 'bounced')`;",
          // A webhook delivery's states and a message's events are other lists that share some names.
          "export const c = sql`SELECT 1 FROM webhook_deliveries WHERE state IN ('pending', 'sending')`;",
          "export const d = ['scheduled', 'sending', 'sent', 'failed', 'cancelled'];",
          // The counters of `reporting`, which share names with the states.
          "export const e = ['sent', 'delivered', 'failed'] as const satisfies readonly Counter[];",
        ].join('\n'),
      );
      assert.deepEqual(await stateGroupsOutside(root), [
        'src/voicemail/planted.ts:1 sent, sending',
        'src/voicemail/planted.ts:2 failed, bounced',
      ]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
