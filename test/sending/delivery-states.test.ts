import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
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
