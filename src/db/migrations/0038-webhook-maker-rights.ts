import { type Kysely, sql } from 'kysely';

// A team or service endpoint hears a user only while its maker (the endpoint's `user_id`, the
// owner the access rule checks) may read that user (identity/access.ts, `read`): an Administrator
// everyone; a Team Administrator the users of their own team whose role is no higher; anyone
// themself. Until now `webhook_endpoints_for` looked only at the stored scope and team, so a
// demoted Administrator's service endpoint kept hearing every tenant, a Team Administrator demoted
// or moved to another team kept the old team's events, and a team endpoint heard an Administrator
// of the team whose data its maker may not read (issue 36). test/security/webhook-rights.test.ts
// holds this SQL to access.ts's rule for every role and team of a maker and of a user.
//
// It stays inlinable (migration 0035): plain `LANGUAGE sql STABLE`, tables named with their schema,
// no `SET`. A user-scope endpoint is its maker's own, so it needs no look-up; a team or service
// endpoint costs two primary-key reads of `users`.
export async function up(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db);
  const schema = rows[0]?.schema as string;
  const endpoints = sql.table(`${schema}.webhook_endpoints`);
  const users = sql.table(`${schema}.users`);
  // Scalar sub-selects, not EXISTS: the planner would make an EXISTS under OR a hashed subplan,
  // reading every user on each call. The heard user's team and role are read once per call
  // (initplans); each team or service endpoint then costs a primary-key read of its maker.
  const heardTeam = sql`(SELECT u.team_id FROM ${users} u WHERE u.id = p_user)`;
  const reaches = sql`(
    SELECT 'Administrator' = ANY (maker.roles)
        OR maker.id = p_user
        OR ('Team Administrator' = ANY (maker.roles) AND maker.team_id = ${heardTeam}
            AND NOT (SELECT 'Administrator' = ANY (u.roles) FROM ${users} u WHERE u.id = p_user))
    FROM ${users} maker WHERE maker.id = w.user_id)`;
  await sql`
    CREATE OR REPLACE FUNCTION webhook_endpoints_for(p_user bigint) RETURNS SETOF webhook_endpoints LANGUAGE sql STABLE AS $$
      SELECT w.* FROM ${endpoints} w
      WHERE w.enabled
        AND ((w.scope = 'user' AND w.user_id = p_user)
          OR (w.scope = 'team' AND w.team_id = ${heardTeam} AND ${reaches})
          OR (w.scope = 'service' AND ${reaches}))
    $$`.execute(db);
}
