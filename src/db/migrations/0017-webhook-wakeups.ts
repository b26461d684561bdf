import { type Kysely, sql } from 'kysely';

// Outbound webhooks, for throughput (docs/webhooks.md): a statement that queues webhook deliveries
// wakes the workers with a NOTIFY at its commit (one per statement, whatever the number of rows,
// and none for a rolled-back one), so a new event is sent within milliseconds instead of at the next
// poll; and events are found by age, for the retention sweep.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION webhook_wake() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('hopper_webhooks', '');
      RETURN NULL;
    END
    $$`.execute(db);
  await sql`
    CREATE TRIGGER webhook_deliveries_wake AFTER INSERT ON webhook_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_wake()`.execute(db);
  await sql`CREATE INDEX webhook_events_occurred_idx ON webhook_events (occurred_at, id)`.execute(db);
}
