import { type Kysely, sql } from 'kysely';

// Contacts, tags, signatures and the templated-message library (docs/contacts.md). One statement per
// query: PGlite runs prepared statements only.
//
// Every owned table leads its indexes with user_id, and the link table carries user_id too, so a
// later split by owner (Citus) keeps each user's rows, and the joins between them, on one shard.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE contacts (
      id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id     bigint NOT NULL REFERENCES users (id),
      first_name  text,
      last_name   text,
      email       text,
      phone       text CHECK (phone ~ '^[0-9]{10}$'),
      time_zone   text,
      status      text NOT NULL DEFAULT 'Subscribed' CHECK (status IN (
                    'Subscribed', 'Unsubscribed', 'Inactive - Hard Bounce',
                    'Inactive - Spam Complaint', 'Inactive - Invalid Email Address')),
      created_at  timestamptz NOT NULL DEFAULT now(),
      updated_at  timestamptz NOT NULL DEFAULT now(),
      deleted_at  timestamptz,
      CONSTRAINT contacts_reachable CHECK (email IS NOT NULL OR phone IS NOT NULL)
    )`.execute(db);
  // Search walks a user's live contacts in id order: page one reads 15 index entries, however many
  // contacts the user has.
  await sql`CREATE INDEX contacts_user_id_idx ON contacts (user_id, id) WHERE deleted_at IS NULL`.execute(db);
  // The target of contact_tags' owner-checked foreign key (it cannot point at a partial index).
  await sql`CREATE UNIQUE INDEX contacts_user_id_id_key ON contacts (user_id, id)`.execute(db);
  // The few deleted contacts, so counting a tag's live contacts is an index-only scan of its links
  // minus this small set, instead of a look-up of every linked contact (35 ms instead of 95 ms
  // for a tag on 100,000 contacts).
  await sql`CREATE INDEX contacts_deleted_idx ON contacts (user_id, id) WHERE deleted_at IS NOT NULL`.execute(db);

  await sql`
    CREATE TABLE tags (
      id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id     bigint NOT NULL REFERENCES users (id),
      name        text NOT NULL,
      created_at  timestamptz NOT NULL DEFAULT now(),
      updated_at  timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  // One tag per owner and name whatever its case: contacts naming "sphere" join the tag "Sphere".
  await sql`CREATE UNIQUE INDEX tags_user_id_name_key ON tags (user_id, lower(name))`.execute(db);
  await sql`CREATE UNIQUE INDEX tags_user_id_id_key ON tags (user_id, id)`.execute(db);

  // Both foreign keys include user_id, so the database itself refuses to give a contact another
  // user's tag. Deleting a tag takes it off every contact.
  await sql`
    CREATE TABLE contact_tags (
      user_id     bigint NOT NULL,
      contact_id  bigint NOT NULL,
      tag_id      bigint NOT NULL,
      PRIMARY KEY (user_id, contact_id, tag_id),
      FOREIGN KEY (user_id, contact_id) REFERENCES contacts (user_id, id),
      FOREIGN KEY (user_id, tag_id) REFERENCES tags (user_id, id) ON DELETE CASCADE
    )`.execute(db);
  // Counting a tag's contacts, resolving tag recipients, and the cascade when a tag is deleted.
  await sql`CREATE INDEX contact_tags_tag_id_idx ON contact_tags (user_id, tag_id, contact_id)`.execute(db);

  await sql`
    CREATE TABLE signatures (
      id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id     bigint NOT NULL REFERENCES users (id),
      name        text NOT NULL,
      body        text NOT NULL,
      created_at  timestamptz NOT NULL DEFAULT now(),
      updated_at  timestamptz NOT NULL DEFAULT now(),
      deleted_at  timestamptz
    )`.execute(db);
  await sql`CREATE INDEX signatures_user_id_idx ON signatures (user_id, id) WHERE deleted_at IS NULL`.execute(db);

  // The library every user reads from: not owned, so no user_id.
  await sql`
    CREATE TABLE templated_messages (
      id                           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      name                         text NOT NULL,
      subject                      text NOT NULL,
      description                  text,
      greeting_with_first_name     text NOT NULL,
      greeting_without_first_name  text NOT NULL,
      body                         text NOT NULL,
      closing                      text,
      ps_line                      text,
      created_at                   timestamptz NOT NULL DEFAULT now(),
      updated_at                   timestamptz NOT NULL DEFAULT now(),
      deleted_at                   timestamptz
    )`.execute(db);
  await sql`CREATE INDEX templated_messages_live_idx ON templated_messages (id) WHERE deleted_at IS NULL`.execute(db);
}
