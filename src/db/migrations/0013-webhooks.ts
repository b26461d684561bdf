import { type Kysely, sql } from 'kysely';

// Outbound webhooks (docs/webhooks.md): each user's endpoints, the events that happened to their
// resources (an outbox) and one delivery per event and endpoint with its attempts.
//
// Events are written by triggers, in the transaction of the change that caused them: whatever
// code moves a message, records a delivery's outcome or writes a contact — the engine, a provider
// webhook, an inbound bounce, the API — its event is kept exactly when its change is, and a
// rolled-back change leaves none. A user without an enabled endpoint subscribed to the event costs
// one indexed look-up and writes nothing. One statement per query: PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE webhook_endpoints (
      id                          bigserial PRIMARY KEY,
      user_id                     bigint NOT NULL REFERENCES users (id),
      url                         text NOT NULL,
      description                 text,
      events                      text[] NOT NULL,
      enabled                     boolean NOT NULL DEFAULT true,
      disabled_reason             text,
      secret                      text NOT NULL,
      previous_secret             text,
      previous_secret_expires_at  timestamptz,
      failing_since               timestamptz,
      created_at                  timestamptz NOT NULL DEFAULT now(),
      updated_at                  timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX webhook_endpoints_user_idx ON webhook_endpoints (user_id, id)`.execute(db);

  await sql`
    CREATE TABLE webhook_events (
      id           bigserial PRIMARY KEY,
      uid          uuid NOT NULL DEFAULT gen_random_uuid(),
      user_id      bigint NOT NULL,
      type         text NOT NULL,
      resource     text NOT NULL,
      resource_id  bigint NOT NULL,
      occurred_at  timestamptz NOT NULL,
      snapshot     jsonb NOT NULL,
      -- The body as first sent, so every retry (and every endpoint) gets the same bytes.
      payload      text
    )`.execute(db);

  await sql`
    CREATE TABLE webhook_deliveries (
      id               bigserial PRIMARY KEY,
      endpoint_id      bigint NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
      event_id         bigint NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
      state            text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending', 'delivered', 'failed')),
      attempts         integer NOT NULL DEFAULT 0,
      next_attempt_at  timestamptz,
      lease_until      timestamptz,
      last_status      integer,
      last_error       text,
      created_at       timestamptz NOT NULL,
      updated_at       timestamptz NOT NULL,
      delivered_at     timestamptz
    )`.execute(db);
  // Due work of an endpoint, oldest first; claims that a dead worker left behind.
  await sql`CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (endpoint_id, next_attempt_at, id) WHERE state = 'pending'`.execute(
    db,
  );
  await sql`CREATE INDEX webhook_deliveries_lease_idx ON webhook_deliveries (endpoint_id, lease_until) WHERE state = 'sending'`.execute(db);
  await sql`CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id)`.execute(db);
  await sql`CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id)`.execute(db);

  await sql`
    CREATE TABLE webhook_attempts (
      id             bigserial PRIMARY KEY,
      delivery_id    bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
      attempt        integer NOT NULL,
      started_at     timestamptz NOT NULL,
      duration_ms    integer NOT NULL,
      status         integer,
      error          text,
      next_retry_at  timestamptz
    )`.execute(db);
  await sql`CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, attempt)`.execute(db);

  // Idempotency-Key (http/idempotency.ts): the first response to a key, per user, for 24 hours.
  await sql`
    CREATE TABLE idempotency_keys (
      user_id       bigint NOT NULL,
      key           text NOT NULL,        -- SHA-256 digest of the client's key; the body is sealed with it
      request_hash  text NOT NULL,
      created_at    timestamptz NOT NULL,
      -- Null while the first request runs.
      status        integer,
      headers       jsonb,
      body          bytea,
      PRIMARY KEY (user_id, key)
    )`.execute(db);
  await sql`CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at)`.execute(db);

  // Rate limits (http/rate-limit.ts): requests per key and window, shared by every API process.
  await sql`
    CREATE UNLOGGED TABLE rate_limit_counts (
      key           text NOT NULL,        -- SHA-256 digest of the client's key; the body is sealed with it
      window_start  timestamptz NOT NULL,
      count         integer NOT NULL,
      PRIMARY KEY (key, window_start)
    )`.execute(db);

  await sql`
    CREATE FUNCTION webhook_emit(p_user bigint, p_type text, p_resource text, p_id bigint, p_at timestamptz, p_snapshot jsonb)
    RETURNS void LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    DECLARE
      event bigint;
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE user_id = p_user AND enabled AND p_type = ANY (events)) THEN
        RETURN;
      END IF;
      INSERT INTO webhook_events (user_id, type, resource, resource_id, occurred_at, snapshot)
      VALUES (p_user, p_type, p_resource, p_id, p_at, p_snapshot)
      RETURNING id INTO event;
      INSERT INTO webhook_deliveries (endpoint_id, event_id, next_attempt_at, created_at, updated_at)
      SELECT id, event, p_at, p_at, p_at FROM webhook_endpoints WHERE user_id = p_user AND enabled AND p_type = ANY (events);
    END
    $$`.execute(db);

  // Messages: every status a client or the engine moves them to, from any code path.
  await sql`
    CREATE FUNCTION webhook_message_status() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
      IF NEW.deleted_at IS NULL AND NEW.status IN ('Scheduled', 'Sending', 'Sent', 'Failed', 'Cancelled')
         AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status) THEN
        PERFORM webhook_emit(NEW.user_id, TG_ARGV[0] || '.' || lower(NEW.status), TG_ARGV[0], NEW.id,
                             COALESCE(NEW.updated_at, now()), to_jsonb(NEW));
      END IF;
      RETURN NULL;
    END
    $$`.execute(db);
  for (const [table, kind] of [
    ['voicemail_drops', 'voicemail_drop'],
    ['templated_emails', 'templated_email'],
  ] as const) {
    await sql`
      CREATE TRIGGER ${sql.id(`${table}_webhook`)} AFTER INSERT OR UPDATE OF status ON ${sql.table(table)}
      FOR EACH ROW EXECUTE FUNCTION webhook_message_status(${sql.lit(kind)})`.execute(db);
  }

  // Deliveries: the outcomes the engine and the outcome recorders write into the ledger.
  await sql`
    CREATE FUNCTION webhook_delivery_state() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
      -- The sending engine's hot path: an owner without endpoints costs one probe, no snapshot.
      IF EXISTS (SELECT 1 FROM webhook_endpoints WHERE user_id = NEW.user_id AND enabled) THEN
        PERFORM webhook_emit(NEW.user_id,
          'delivery.' || CASE NEW.state WHEN 'dropped' THEN 'failed' ELSE NEW.state END,
          'delivery', NEW.id, COALESCE(NEW.updated_at, now()), to_jsonb(NEW));
      END IF;
      RETURN NULL;
    END
    $$`.execute(db);
  await sql`
    CREATE TRIGGER deliveries_webhook AFTER UPDATE OF state ON deliveries
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('sent', 'delivered', 'bounced', 'dropped', 'failed'))
    EXECUTE FUNCTION webhook_delivery_state()`.execute(db);

  // Engagement: opens, clicks and replies are events on a delivery that do not change its state.
  await sql`
    CREATE FUNCTION webhook_delivery_event() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    DECLARE
      d deliveries%ROWTYPE;
    BEGIN
      SELECT * INTO d FROM deliveries WHERE id = NEW.delivery_id;
      IF FOUND THEN
        PERFORM webhook_emit(d.user_id,
          'delivery.' || CASE NEW.type WHEN 'open' THEN 'opened' WHEN 'click' THEN 'clicked' ELSE 'replied' END,
          'delivery', d.id, NEW.occurred_at,
          to_jsonb(d) || jsonb_build_object('event', jsonb_build_object('type', NEW.type, 'detail', NEW.detail, 'occurred_at', NEW.occurred_at)));
      END IF;
      RETURN NULL;
    END
    $$`.execute(db);
  await sql`
    CREATE TRIGGER delivery_events_webhook AFTER INSERT ON delivery_events
    FOR EACH ROW WHEN (NEW.type IN ('open', 'click', 'reply', 'replied'))
    EXECUTE FUNCTION webhook_delivery_event()`.execute(db);

  // Contacts: created, updated, deleted (soft), and a status change (with unsubscribed on its own).
  await sql`
    CREATE FUNCTION webhook_contact() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    DECLARE
      at timestamptz := COALESCE(NEW.updated_at, now());
    BEGIN
      IF TG_OP = 'INSERT' THEN
        PERFORM webhook_emit(NEW.user_id, 'contact.created', 'contact', NEW.id, COALESCE(NEW.created_at, now()), to_jsonb(NEW));
      ELSIF NEW.deleted_at IS NOT NULL AND OLD.deleted_at IS NULL THEN
        PERFORM webhook_emit(NEW.user_id, 'contact.deleted', 'contact', NEW.id, NEW.deleted_at, to_jsonb(NEW));
      ELSIF NEW.deleted_at IS NULL THEN
        PERFORM webhook_emit(NEW.user_id, 'contact.updated', 'contact', NEW.id, at, to_jsonb(NEW));
        IF OLD.status IS DISTINCT FROM NEW.status THEN
          PERFORM webhook_emit(NEW.user_id, 'contact.status_changed', 'contact', NEW.id, at,
                               to_jsonb(NEW) || jsonb_build_object('previous_status', OLD.status));
          IF NEW.status = 'Unsubscribed' THEN
            PERFORM webhook_emit(NEW.user_id, 'contact.unsubscribed', 'contact', NEW.id, at, to_jsonb(NEW));
          END IF;
        END IF;
      END IF;
      RETURN NULL;
    END
    $$`.execute(db);
  await sql`
    CREATE TRIGGER contacts_webhook AFTER INSERT OR UPDATE ON contacts
    FOR EACH ROW EXECUTE FUNCTION webhook_contact()`.execute(db);
}
