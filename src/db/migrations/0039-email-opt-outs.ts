import { type Kysely, sql } from 'kysely';

// Only the person's own word lifts an unsubscribe or a complaint (docs/decisions.md, issue 36):
// kept by the database itself, whatever statement writes a contact, as migration 0021 keeps
// addresses unique.
//
// A contact's email suppression is the person's word when its status is Unsubscribed or Inactive
// - Spam Complaint and the owner did not set it (an owner's setting says "Set by the owner" and
// names no delivery; a suppression from before suppressions were recorded is taken as the
// person's: nobody can tell). `email_opt_outs` keeps, per owner and address (any case), the first
// such word, so that the address keeps it whichever contact holds it later. Two triggers:
// - after a contact is written with the person's word, its address is recorded (first word kept);
// - before a contact is written: one that had the person's word keeps it (its status and
//   suppression as they were), and one given a recorded address takes that address's word, so a
//   re-created contact, an import or a readdressed contact starts where the address stands.
// The API refuses each of these writes first, saying why (contacts/contacts.ts, import.ts); the
// triggers decide what the checks cannot see, a write racing the person's unsubscribe. (No path
// lets the person subscribe again yet; one would have to pass these triggers.)
//
// Existing data: every address with the person's word is recorded, live contacts included or
// deleted ones, and a live contact that holds such an address without it (re-created after a
// delete, before this) takes it back. One statement per query: PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION contact_persons_word(status text, suppression jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE AS $$
      SELECT status IN ('Unsubscribed', 'Inactive - Spam Complaint')
        AND NOT coalesce(suppression ->> 'description' = 'Set by the owner' AND suppression ->> 'delivery_id' IS NULL, false)
    $$`.execute(db);

  await sql`
    CREATE TABLE email_opt_outs (
      user_id     bigint NOT NULL REFERENCES users (id),
      email_key   text NOT NULL,
      status      text NOT NULL CHECK (status IN ('Unsubscribed', 'Inactive - Spam Complaint')),
      suppression jsonb NOT NULL,
      PRIMARY KEY (user_id, email_key)
    )`.execute(db);

  // The suppression an address keeps: the contact's, or for one from before suppressions were
  // recorded, its reason without a time or a delivery.
  await sql`
    INSERT INTO email_opt_outs (user_id, email_key, status, suppression)
    SELECT DISTINCT ON (user_id, lower(email)) user_id, lower(email), status,
           coalesce(email_suppression, jsonb_build_object(
             'reason', CASE status WHEN 'Unsubscribed' THEN 'unsubscribed' ELSE 'complaint' END,
             'at', NULL, 'delivery_id', NULL, 'description', NULL))
    FROM contacts
    WHERE email IS NOT NULL AND contact_persons_word(status, email_suppression)
    ORDER BY user_id, lower(email), deleted_at IS NOT NULL, id`.execute(db);

  await sql`
    CREATE FUNCTION contacts_record_opt_out() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
      INSERT INTO email_opt_outs (user_id, email_key, status, suppression)
      VALUES (NEW.user_id, lower(NEW.email), NEW.status, coalesce(NEW.email_suppression, jsonb_build_object(
        'reason', CASE NEW.status WHEN 'Unsubscribed' THEN 'unsubscribed' ELSE 'complaint' END,
        'at', NULL, 'delivery_id', NULL, 'description', NULL)))
      ON CONFLICT (user_id, email_key) DO NOTHING;
      RETURN NULL;
    END
    $$`.execute(db);
  await sql`
    CREATE TRIGGER contacts_record_opt_out AFTER INSERT OR UPDATE OF status, email, email_suppression ON contacts
    FOR EACH ROW WHEN (NEW.email IS NOT NULL AND contact_persons_word(NEW.status, NEW.email_suppression))
    EXECUTE FUNCTION contacts_record_opt_out()`.execute(db);

  await sql`
    CREATE FUNCTION contacts_keep_opt_out() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    DECLARE
      kept record;
    BEGIN
      IF TG_OP = 'UPDATE' AND contact_persons_word(OLD.status, OLD.email_suppression) THEN
        NEW.status := OLD.status;
        NEW.email_suppression := OLD.email_suppression;
        RETURN NEW;
      END IF;
      IF NEW.email IS NULL OR NEW.deleted_at IS NOT NULL THEN
        RETURN NEW;
      END IF;
      SELECT o.status, o.suppression INTO kept FROM email_opt_outs o
      WHERE o.user_id = NEW.user_id AND o.email_key = lower(NEW.email);
      IF FOUND THEN
        NEW.status := kept.status;
        NEW.email_suppression := kept.suppression;
      END IF;
      RETURN NEW;
    END
    $$`.execute(db);
  await sql`
    CREATE TRIGGER contacts_keep_opt_out BEFORE INSERT OR UPDATE OF status, email, email_suppression ON contacts
    FOR EACH ROW WHEN (NOT contact_persons_word(NEW.status, NEW.email_suppression))
    EXECUTE FUNCTION contacts_keep_opt_out()`.execute(db);

  // Live contacts re-created (or readdressed) onto an address that said no, before this.
  await sql`
    UPDATE contacts c SET status = o.status, email_suppression = o.suppression, updated_at = now()
    FROM email_opt_outs o
    WHERE o.user_id = c.user_id AND o.email_key = lower(c.email)
      AND c.deleted_at IS NULL AND NOT contact_persons_word(c.status, c.email_suppression)`.execute(db);
}
