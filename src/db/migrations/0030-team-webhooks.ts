import { type Kysely, sql } from 'kysely';

// Wider webhook subscriptions (docs/webhooks.md, "Team and service endpoints"): an endpoint is the
// user's own (`scope` user), its team's (`team`: the events of every member of `team_id`, managed by
// the team's Team Administrators) or the whole service's (`service`: every user's events, managed by
// Administrators). `user_id` stays the user who made it (the owner the access rule checks).
//
// `webhook_endpoints_for(user)` is every enabled endpoint hearing that user's events, and every
// trigger of migrations 0013, 0016 and 0021 now asks it instead of matching `user_id` (their bodies
// are otherwise unchanged). One statement per query: PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE webhook_endpoints ADD COLUMN scope text NOT NULL DEFAULT 'user' CHECK (scope IN ('user', 'team', 'service'))`.execute(
    db,
  );
  await sql`ALTER TABLE webhook_endpoints ADD COLUMN team_id bigint REFERENCES teams (id) ON DELETE CASCADE`.execute(db);
  await sql`ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_team_scope CHECK ((scope = 'team') = (team_id IS NOT NULL))`.execute(
    db,
  );
  await sql`CREATE INDEX webhook_endpoints_team_idx ON webhook_endpoints (team_id) WHERE scope = 'team'`.execute(db);
  await sql`CREATE INDEX webhook_endpoints_service_idx ON webhook_endpoints (id) WHERE scope = 'service'`.execute(db);

  await sql`
    CREATE FUNCTION webhook_endpoints_for(p_user bigint) RETURNS SETOF webhook_endpoints LANGUAGE sql STABLE
    SET search_path FROM CURRENT AS $$
      SELECT w.* FROM webhook_endpoints w WHERE w.user_id = p_user AND w.scope = 'user' AND w.enabled
      UNION ALL
      SELECT w.* FROM webhook_endpoints w
      WHERE w.scope = 'team' AND w.enabled AND w.team_id = (SELECT u.team_id FROM users u WHERE u.id = p_user)
      UNION ALL
      SELECT w.* FROM webhook_endpoints w WHERE w.scope = 'service' AND w.enabled
    $$`.execute(db);

  await sql`
    CREATE OR REPLACE FUNCTION webhook_emit(p_user bigint, p_type text, p_resource text, p_id bigint, p_at timestamptz, p_snapshot jsonb)
    RETURNS void LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    DECLARE
      event bigint;
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM webhook_endpoints_for(p_user) w WHERE p_type = ANY (w.events)) THEN
        RETURN;
      END IF;
      INSERT INTO webhook_events (user_id, type, resource, resource_id, occurred_at, snapshot)
      VALUES (p_user, p_type, p_resource, p_id, p_at, p_snapshot)
      RETURNING id INTO event;
      INSERT INTO webhook_deliveries (endpoint_id, event_id, next_attempt_at, created_at, updated_at)
      SELECT w.id, event, p_at, p_at, p_at FROM webhook_endpoints_for(p_user) w WHERE p_type = ANY (w.events);
    END
    $$`.execute(db);

  await sql`
    CREATE OR REPLACE FUNCTION webhook_emit_all(p_events jsonb) RETURNS void LANGUAGE sql
    SET search_path FROM CURRENT AS $$
      WITH event AS (
        INSERT INTO webhook_events (user_id, type, resource, resource_id, occurred_at, snapshot)
        SELECT (x.e ->> 'user_id')::bigint, x.e ->> 'type', 'contact', (x.e ->> 'resource_id')::bigint,
               (x.e ->> 'occurred_at')::timestamptz, x.e -> 'snapshot'
        FROM jsonb_array_elements(p_events) WITH ORDINALITY AS x(e, n)
        WHERE EXISTS (SELECT 1 FROM webhook_endpoints_for((x.e ->> 'user_id')::bigint) w WHERE x.e ->> 'type' = ANY (w.events))
        ORDER BY x.n
        RETURNING id, user_id, type, occurred_at
      )
      INSERT INTO webhook_deliveries (endpoint_id, event_id, next_attempt_at, created_at, updated_at)
      SELECT w.id, event.id, event.occurred_at, event.occurred_at, event.occurred_at
      FROM event CROSS JOIN LATERAL webhook_endpoints_for(event.user_id) w
      WHERE event.type = ANY (w.events)
      ORDER BY event.id, w.id
    $$`.execute(db);

  await sql`
    CREATE OR REPLACE FUNCTION webhook_contacts_inserted() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM (SELECT DISTINCT user_id FROM new_rows) u CROSS JOIN LATERAL webhook_endpoints_for(u.user_id) w
                     WHERE 'contact.created' = ANY (w.events)) THEN
        RETURN NULL;
      END IF;
      PERFORM webhook_emit_all(coalesce(jsonb_agg(jsonb_build_object(
          'user_id', n.user_id, 'type', 'contact.created', 'resource_id', n.id,
          'occurred_at', COALESCE(n.created_at, now()), 'snapshot', to_jsonb(n)) ORDER BY n.id), '[]'))
        FROM new_rows n;
      RETURN NULL;
    END
    $$`.execute(db);

  await sql`
    CREATE OR REPLACE FUNCTION webhook_contacts_updated() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM (SELECT DISTINCT user_id FROM new_rows) u CROSS JOIN LATERAL webhook_endpoints_for(u.user_id) w
                     WHERE w.events && ARRAY['contact.deleted', 'contact.updated', 'contact.status_changed', 'contact.unsubscribed']) THEN
        RETURN NULL;
      END IF;
      PERFORM webhook_emit_all(coalesce(jsonb_agg(jsonb_build_object(
          'user_id', e.user_id, 'type', e.type, 'resource_id', e.id, 'occurred_at', e.at, 'snapshot', e.snapshot)
          ORDER BY e.id, e.seq), '[]'))
        FROM (
          SELECT n.user_id, n.id, k.seq, k.type, k.at, k.snapshot
          FROM new_rows n JOIN old_rows o ON o.id = n.id
          CROSS JOIN LATERAL (VALUES
            (1, 'contact.deleted', n.deleted_at, to_jsonb(n), n.deleted_at IS NOT NULL AND o.deleted_at IS NULL),
            (2, 'contact.updated', COALESCE(n.updated_at, now()), to_jsonb(n),
                n.deleted_at IS NULL AND CASE WHEN n.duplicate_email IS DISTINCT FROM o.duplicate_email
                                              THEN to_jsonb(n) - 'duplicate_email' IS DISTINCT FROM to_jsonb(o) - 'duplicate_email'
                                              ELSE true END),
            (3, 'contact.status_changed', COALESCE(n.updated_at, now()),
                to_jsonb(n) || jsonb_build_object('previous_status', o.status),
                n.deleted_at IS NULL AND o.status IS DISTINCT FROM n.status),
            (4, 'contact.unsubscribed', COALESCE(n.updated_at, now()), to_jsonb(n),
                n.deleted_at IS NULL AND o.status IS DISTINCT FROM n.status AND n.status = 'Unsubscribed')
          ) AS k(seq, type, at, snapshot, applies)
          WHERE k.applies
        ) e;
      RETURN NULL;
    END
    $$`.execute(db);

  await sql`
    CREATE OR REPLACE FUNCTION webhook_delivery_state() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
      -- The sending engine's hot path: an owner nobody listens to costs one probe, no snapshot.
      IF EXISTS (SELECT 1 FROM webhook_endpoints_for(NEW.user_id)) THEN
        PERFORM webhook_emit(NEW.user_id,
          'delivery.' || CASE NEW.state WHEN 'dropped' THEN 'failed' ELSE NEW.state END,
          'delivery', NEW.id, COALESCE(NEW.updated_at, now()), to_jsonb(NEW));
      END IF;
      RETURN NULL;
    END
    $$`.execute(db);
}
