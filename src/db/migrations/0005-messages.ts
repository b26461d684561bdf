import { type Kysely, sql } from 'kysely';

// The two resources of the specification and their delivery counters. One statement per query:
// PGlite runs prepared statements only.
export async function up(db: Kysely<unknown>): Promise<void> {
  const statuses = sql`('Saved', 'Scheduled', 'Sending', 'Sent', 'Failed', 'Cancelled')`;

  await sql`
    CREATE TABLE voicemail_drops (
      id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id          bigint NOT NULL REFERENCES users (id),
      provider         text NOT NULL,
      media_id         bigint NOT NULL REFERENCES media (id),
      callback_number  text NOT NULL CHECK (callback_number ~ '^[0-9]{10}$'),
      name             text NOT NULL,
      description      text,
      status           text NOT NULL DEFAULT 'Saved' CHECK (status IN ${statuses}),
      reason           text,
      send_type        text NOT NULL DEFAULT 'Now' CHECK (send_type IN ('Now', 'Future')),
      send_at          timestamptz,
      sending_at       timestamptz,
      sent_at          timestamptz,
      recipients       jsonb NOT NULL DEFAULT '[]',
      created_at       timestamptz NOT NULL DEFAULT now(),
      updated_at       timestamptz NOT NULL DEFAULT now(),
      deleted_at       timestamptz
    )`.execute(db);
  // Search walks one user's live drops in id order; filters on status are the common ones.
  await sql`CREATE INDEX voicemail_drops_user_id_idx ON voicemail_drops (user_id, id) WHERE deleted_at IS NULL`.execute(db);
  await sql`CREATE INDEX voicemail_drops_user_status_idx ON voicemail_drops (user_id, status, id) WHERE deleted_at IS NULL`.execute(db);

  await sql`
    CREATE TABLE templated_emails (
      id                           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id                      bigint NOT NULL REFERENCES users (id),
      templated_message_id         bigint REFERENCES templated_messages (id),
      subject                      text NOT NULL,
      description                  text NOT NULL DEFAULT '',
      greeting_with_first_name     text NOT NULL,
      greeting_without_first_name  text NOT NULL,
      body                         text NOT NULL,
      closing                      text NOT NULL DEFAULT '',
      ps_line                      text NOT NULL DEFAULT '',
      text                         text NOT NULL,
      signature_id                 bigint REFERENCES signatures (id),
      status                       text NOT NULL DEFAULT 'Saved' CHECK (status IN ${statuses}),
      reason                       text,
      send_type                    text NOT NULL DEFAULT 'Now' CHECK (send_type IN ('Now', 'Future')),
      send_at                      timestamptz,
      sending_at                   timestamptz,
      sent_at                      timestamptz,
      recipients                   jsonb NOT NULL DEFAULT '[]',
      exclusions                   jsonb NOT NULL DEFAULT '[]',
      source                       text NOT NULL DEFAULT 'API' CHECK (source IN ('API', 'Web')),
      created_at                   timestamptz NOT NULL DEFAULT now(),
      updated_at                   timestamptz NOT NULL DEFAULT now(),
      deleted_at                   timestamptz
    )`.execute(db);
  await sql`CREATE INDEX templated_emails_user_id_idx ON templated_emails (user_id, id) WHERE deleted_at IS NULL`.execute(db);
  await sql`CREATE INDEX templated_emails_user_status_idx ON templated_emails (user_id, status, id) WHERE deleted_at IS NULL`.execute(db);

  // Delivery counters, several rows (shards) per message: concurrent event writers add to
  // different rows instead of queueing on one; a read sums a message's shards.
  await sql`
    CREATE TABLE message_counters (
      message_kind  text NOT NULL CHECK (message_kind IN ('voicemail_drop', 'templated_email')),
      message_id    bigint NOT NULL,
      shard         smallint NOT NULL DEFAULT 0,
      user_id       bigint NOT NULL,
      sent          integer NOT NULL DEFAULT 0,
      processed     integer NOT NULL DEFAULT 0,
      delivered     integer NOT NULL DEFAULT 0,
      open          integer NOT NULL DEFAULT 0,
      click         integer NOT NULL DEFAULT 0,
      reply         integer NOT NULL DEFAULT 0,
      spamreport    integer NOT NULL DEFAULT 0,
      unsubscribe   integer NOT NULL DEFAULT 0,
      deferred      integer NOT NULL DEFAULT 0,
      dropped       integer NOT NULL DEFAULT 0,
      bounce        integer NOT NULL DEFAULT 0,
      hard_bounce   integer NOT NULL DEFAULT 0,
      soft_bounce   integer NOT NULL DEFAULT 0,
      failed        integer NOT NULL DEFAULT 0,
      PRIMARY KEY (message_kind, message_id, shard)
    )`.execute(db);
}
