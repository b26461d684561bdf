import { type Kysely, sql } from 'kysely';

// Contact webhook events (migration 0013) emitted once per statement instead of once per row: a
// bulk import writes 1,000 contacts a statement, and a row trigger ran a PL/pgSQL call, an
// endpoint lookup and a to_jsonb per row — 40% of the import's insert time, with no endpoint at
// all. The statement triggers read the transition tables and emit the same events, in the same
// order (by contact, then created/deleted/updated, status_changed, unsubscribed), for users with
// an enabled endpoint that subscribes to the type. A trigger with transition tables takes one
// event, hence one for INSERT and one for UPDATE.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER contacts_webhook ON contacts`.execute(db);
  await sql`DROP FUNCTION webhook_contact()`.execute(db);

  // The events of a statement, one row each, in emission order: the same rows webhook_emit makes.
  await sql`
    CREATE FUNCTION webhook_emit_all(p_events jsonb) RETURNS void LANGUAGE sql
    SET search_path FROM CURRENT AS $$
      WITH event AS (
        INSERT INTO webhook_events (user_id, type, resource, resource_id, occurred_at, snapshot)
        SELECT (x.e ->> 'user_id')::bigint, x.e ->> 'type', 'contact', (x.e ->> 'resource_id')::bigint,
               (x.e ->> 'occurred_at')::timestamptz, x.e -> 'snapshot'
        FROM jsonb_array_elements(p_events) WITH ORDINALITY AS x(e, n)
        WHERE EXISTS (SELECT 1 FROM webhook_endpoints w
                      WHERE w.user_id = (x.e ->> 'user_id')::bigint AND w.enabled AND x.e ->> 'type' = ANY (w.events))
        ORDER BY x.n
        RETURNING id, user_id, type, occurred_at
      )
      INSERT INTO webhook_deliveries (endpoint_id, event_id, next_attempt_at, created_at, updated_at)
      SELECT w.id, event.id, event.occurred_at, event.occurred_at, event.occurred_at
      FROM event JOIN webhook_endpoints w ON w.user_id = event.user_id AND w.enabled AND event.type = ANY (w.events)
      ORDER BY event.id, w.id
    $$`.execute(db);

  await sql`
    CREATE FUNCTION webhook_contacts_inserted() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
      -- Nothing to build unless one of these users listens for it.
      IF NOT EXISTS (SELECT 1 FROM webhook_endpoints w
                     WHERE w.enabled AND 'contact.created' = ANY (w.events) AND w.user_id IN (SELECT user_id FROM new_rows)) THEN
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
    CREATE TRIGGER contacts_webhook_insert AFTER INSERT ON contacts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_contacts_inserted()`.execute(db);

  await sql`
    CREATE FUNCTION webhook_contacts_updated() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM webhook_endpoints w
                     WHERE w.enabled AND w.events && ARRAY['contact.deleted', 'contact.updated', 'contact.status_changed', 'contact.unsubscribed']
                       AND w.user_id IN (SELECT user_id FROM new_rows)) THEN
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
            (2, 'contact.updated', COALESCE(n.updated_at, now()), to_jsonb(n), n.deleted_at IS NULL),
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
    CREATE TRIGGER contacts_webhook_update AFTER UPDATE ON contacts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_contacts_updated()`.execute(db);
}
