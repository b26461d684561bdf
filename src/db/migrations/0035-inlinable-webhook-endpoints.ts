import { type Kysely, sql } from 'kysely';

// `webhook_endpoints_for(user)` (migration 0030) is asked by the per-row triggers on every change
// of a delivery's state and a message's status. Declared with `SET search_path FROM CURRENT`, it
// could not be inlined: PostgreSQL ran it as a function of its own, planned anew on every call —
// 0.4–0.5 ms of the database per row, for an owner nobody listens to, most of what recording a
// sent email cost (docs/performance.md, "Sending: a trigger that could not be inlined"). Without
// the setting, and with its tables named with their schema so that it reads the same whatever the
// caller's search_path, the planner folds it into the asking statement; one scan with the three
// scopes OR-ed (an endpoint has exactly one scope, so no row is counted twice) costs 10–20 µs.
export async function up(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db);
  const schema = rows[0]?.schema as string;
  const endpoints = sql.table(`${schema}.webhook_endpoints`);
  const users = sql.table(`${schema}.users`);
  await sql`
    CREATE OR REPLACE FUNCTION webhook_endpoints_for(p_user bigint) RETURNS SETOF webhook_endpoints LANGUAGE sql STABLE AS $$
      SELECT w.* FROM ${endpoints} w
      WHERE w.enabled
        AND ((w.scope = 'user' AND w.user_id = p_user)
          OR (w.scope = 'team' AND w.team_id = (SELECT u.team_id FROM ${users} u WHERE u.id = p_user))
          OR w.scope = 'service')
    $$`.execute(db);
}
