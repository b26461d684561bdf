import { type Kysely, sql } from 'kysely';

// The complaint and bounce brakes (issue 40, part 2; docs/sending.md, "Brakes"): a user whose
// spam reports or hard bounces over the last 30 days pass the thresholds has their sending paused
// — why, since when and the two rates — until an Administrator resumes it (`sending_resumed_at`:
// what was held then is let go). The pause is announced by a `user.sending_paused` webhook event,
// written by a trigger in the transaction that pauses.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE users
      ADD COLUMN sending_paused_reason text,
      ADD COLUMN sending_paused_at timestamptz,
      ADD COLUMN sending_paused_complaint_rate double precision,
      ADD COLUMN sending_paused_hard_bounce_rate double precision,
      ADD COLUMN sending_resumed_at timestamptz`.execute(db);

  await sql`
    CREATE FUNCTION webhook_user_sending_paused() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
      PERFORM webhook_emit(NEW.id, 'user.sending_paused', 'user', NEW.id, NEW.sending_paused_at, jsonb_build_object(
        'user_id', NEW.id,
        'sending_paused', jsonb_build_object(
          'reason', NEW.sending_paused_reason,
          'since', to_char(NEW.sending_paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
          'complaint_rate', NEW.sending_paused_complaint_rate,
          'hard_bounce_rate', NEW.sending_paused_hard_bounce_rate)));
      RETURN NULL;
    END
    $$`.execute(db);
  await sql`
    CREATE TRIGGER users_sending_paused_webhook AFTER UPDATE OF sending_paused_at ON users
    FOR EACH ROW WHEN (OLD.sending_paused_at IS NULL AND NEW.sending_paused_at IS NOT NULL)
    EXECUTE FUNCTION webhook_user_sending_paused()`.execute(db);
}
