import { type Kysely, sql } from 'kysely';

// One live contact per owner and email address, in any letter case, kept by the database itself:
// a unique index on (user_id, lower(email)) over live contacts, on which every write of an address
// relies (contacts/contacts.ts, contacts/import.ts). Until now only a look-up before the write
// checked it, and two concurrent writes could both pass.
//
// Contacts that already shared an address keep it (docs/decisions.md): in each such group all but
// the oldest are marked `duplicate_email` and left out of the index, so the oldest holds the
// address. Two triggers keep "each live address has exactly one unmarked holder, its oldest live
// contact" true from then on, whatever statement changes a contact:
// - when the holder leaves its address (deleted, or its address changed), the oldest marked live
//   contact with that address is unmarked and holds it, in the same statement;
// - a marked contact whose own address changes (or that would come back to life) loses its mark,
//   and so meets the index like any other contact.
// Nothing else ever marks a contact, so groups only shrink. One statement per query: PGlite runs
// prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE contacts ADD COLUMN duplicate_email boolean NOT NULL DEFAULT false`.execute(db);

  // Migration 0016's update trigger, unchanged except that a row whose only change is its mark
  // (below, and each time a holder is replaced) emits no contact.updated: its API shape is the same.
  await sql`
    CREATE OR REPLACE FUNCTION webhook_contacts_updated() RETURNS trigger LANGUAGE plpgsql
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

  // The shared addresses already there: the oldest contact of each group (by id, the order they
  // were created in) holds it, the others are marked.
  await sql`
    UPDATE contacts c SET duplicate_email = true
    FROM (
      SELECT id, row_number() OVER (PARTITION BY user_id, lower(email) ORDER BY id) AS n
      FROM contacts WHERE deleted_at IS NULL AND email IS NOT NULL
    ) d
    WHERE c.id = d.id AND d.n > 1`.execute(db);

  await sql`
    CREATE UNIQUE INDEX contacts_owner_email_key ON contacts (user_id, lower(email))
    WHERE deleted_at IS NULL AND email IS NOT NULL AND NOT duplicate_email`.execute(db);
  // Migration 0012's look-up index: every look-up of an address now asks for its holder, which the
  // unique index finds.
  await sql`DROP INDEX contacts_owner_email_idx`.execute(db);
  // The marked contacts of an address, oldest first (few, and only from before this migration).
  await sql`
    CREATE INDEX contacts_duplicate_email_idx ON contacts (user_id, lower(email), id)
    WHERE deleted_at IS NULL AND duplicate_email`.execute(db);

  await sql`
    CREATE FUNCTION contacts_email_unmark() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      NEW.duplicate_email := false;
      RETURN NEW;
    END
    $$`.execute(db);
  await sql`
    CREATE TRIGGER contacts_email_unmark BEFORE UPDATE OF email, deleted_at ON contacts
    FOR EACH ROW WHEN (NEW.duplicate_email AND (lower(NEW.email) IS DISTINCT FROM lower(OLD.email)
                                               OR (OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL)))
    EXECUTE FUNCTION contacts_email_unmark()`.execute(db);

  // Each statement in a volatile function sees what committed before it: a candidate that another
  // transaction deleted or readdressed meanwhile is passed over and the next one taken.
  await sql`
    CREATE FUNCTION contacts_email_holder_left() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    DECLARE
      heir bigint;
    BEGIN
      LOOP
        SELECT id INTO heir FROM contacts
        WHERE user_id = OLD.user_id AND lower(email) = lower(OLD.email) AND deleted_at IS NULL AND duplicate_email
        ORDER BY id LIMIT 1;
        EXIT WHEN heir IS NULL;
        UPDATE contacts SET duplicate_email = false
        WHERE user_id = OLD.user_id AND id = heir AND lower(email) = lower(OLD.email) AND deleted_at IS NULL AND duplicate_email;
        EXIT WHEN FOUND;
      END LOOP;
      RETURN NULL;
    END
    $$`.execute(db);
  await sql`
    CREATE TRIGGER contacts_email_holder_left AFTER UPDATE OF email, deleted_at ON contacts
    FOR EACH ROW WHEN (NOT OLD.duplicate_email AND OLD.deleted_at IS NULL AND OLD.email IS NOT NULL
                       AND (NEW.deleted_at IS NOT NULL OR lower(NEW.email) IS DISTINCT FROM lower(OLD.email)))
    EXECUTE FUNCTION contacts_email_holder_left()`.execute(db);
}
