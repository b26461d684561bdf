import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../src/db/database.ts';
import { createApiKey } from '../src/identity/api-keys.ts';

// The benches' seed of voicemail drops, in SQL rather than through the API (bench/api.ts, bench/soak.ts,
// bench/nested-reads.ts).

export interface Owner {
  userId: number;
  key: string;
  mediaId: number;
  drops: number;
  sampleIds: number[];
}

/**
 * An owner, one audio media item and `drops` drops: about 70% Sent, 15% Saved, 5% Scheduled, the
 * rest Failed or Cancelled; names "Open house follow-up n", "Price drop n", "Market update n".
 * Owners' rows are inserted one owner after another (each owner's rows are then close together on
 * disk; the search's cost is the index's either way).
 */
export async function seedOwner(db: Db, label: string, drops: number): Promise<Owner> {
  const user = await db
    .insertInto('users')
    .values({
      first_name: 'Bench',
      last_name: label,
      email: `${label}@bench.example`,
      roles: sql`ARRAY['User']::text[]` as never,
      created_at: new Date(),
      updated_at: new Date(),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const media = await insertAudio(db, user.id);
  await sql`
    INSERT INTO voicemail_drops
      (user_id, provider, media_id, callback_number, name, description, status, reason, send_type,
       send_at, sending_at, sent_at, recipients, created_at, updated_at)
    SELECT ${user.id}, 'Sandbox', ${media.id}, '7272329117',
           CASE WHEN n % 10 = 3 THEN 'Open house follow-up ' || n
                WHEN n % 10 = 5 THEN 'Price drop ' || n
                ELSE 'Market update ' || n END,
           CASE WHEN n % 4 = 0 THEN 'Spring list' END,
           s.status,
           CASE WHEN s.status = 'Failed' THEN 'No recipients' END,
           CASE WHEN s.status = 'Saved' THEN 'Now' ELSE 'Future' END,
           CASE WHEN s.status <> 'Saved' THEN t.at + interval '1 hour' END,
           CASE WHEN s.status IN ('Sent', 'Failed', 'Cancelled') THEN t.at + interval '1 hour' END,
           CASE WHEN s.status IN ('Sent', 'Failed') THEN t.at + interval '1 hour 5 minutes' END,
           '[{"group": "Tags", "label": "Sphere", "value": 1}]'::jsonb,
           t.at, t.at
    FROM generate_series(1, ${drops}) AS n
    CROSS JOIN LATERAL (SELECT CASE
        WHEN n % 100 < 70 THEN 'Sent' WHEN n % 100 < 85 THEN 'Saved' WHEN n % 100 < 90 THEN 'Scheduled'
        WHEN n % 100 < 95 THEN 'Failed' ELSE 'Cancelled' END AS status) AS s
    CROSS JOIN LATERAL (SELECT timestamptz '2025-01-01' + n * interval '30 seconds' AS at) AS t
  `.execute(db);
  await sql`
    INSERT INTO message_counters (message_kind, message_id, shard, user_id, sent, delivered, failed)
    SELECT 'voicemail_drop', d.id, shard, d.user_id, 5, 4, shard
    FROM voicemail_drops d CROSS JOIN generate_series(0, 1) AS shard
    WHERE d.user_id = ${user.id} AND d.status = 'Sent'
  `.execute(db);
  const { key } = await createApiKey(db, user.id, 'bench', { createdBy: user.id, now: new Date() });
  const sample = await sql<{ id: string }>`
    SELECT id FROM voicemail_drops WHERE user_id = ${user.id} ORDER BY random() LIMIT 2000`.execute(db);
  return { userId: Number(user.id), key, mediaId: Number(media.id), drops, sampleIds: sample.rows.map((r) => Number(r.id)) };
}

/** An owner's audio media item, as a drop plays it (no file behind it: the benches never fetch it). */
export async function insertAudio(db: Db, userId: number): Promise<{ id: number }> {
  return await db
    .insertInto('media')
    .values({
      user_id: userId,
      name: 'open-house',
      file_name: 'open-house.mp3',
      collection_name: 'audio',
      mime_type: 'audio/mpeg',
      size: 664_755,
      duration_seconds: 41.5,
      token: randomBytes(24).toString('base64url'),
      storage_key: `bench/${userId}.mp3`,
      created_at: new Date(),
      updated_at: new Date(),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
}
