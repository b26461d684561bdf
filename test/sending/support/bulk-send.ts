import { sql } from 'kysely';
import type { Db } from '../../../src/db/database.ts';
import type { JobQueue } from '../../../src/db/job-queue.ts';

/**
 * A big send made straight in SQL (the API would take minutes to create 100,000 contacts): `n`
 * subscribed contacts `bulk-<tag>-<i>@example.test` of `userId` under one new tag (every tenth without a
 * first name; the tag's id in the address keeps each seed's addresses its own: one owner holds one
 * live contact per address), and a draft templated email to that tag. `scheduleNow` then makes it due exactly as
 * the API does: status and due job in one transaction.
 */
export interface BulkSend {
  messageId: number;
  tagId: number;
  contacts: number;
}

export async function seedBulkSend(db: Db, userId: number, n: number): Promise<BulkSend> {
  const tag = await sql<{ id: number }>`
    INSERT INTO tags (user_id, name) VALUES (${userId}, ${`bulk-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`}) RETURNING id`.execute(
    db,
  );
  const tagId = Number(tag.rows[0]!.id);
  await sql`
    WITH made AS (
      INSERT INTO contacts (user_id, first_name, last_name, email)
      SELECT ${userId}, CASE WHEN i % 10 = 0 THEN NULL ELSE 'First' || i END, 'Last' || i, 'bulk-' || ${tagId}::bigint || '-' || i || '@example.test'
      FROM generate_series(1, ${n}::integer) AS i
      RETURNING id
    )
    INSERT INTO contact_tags (user_id, contact_id, tag_id) SELECT ${userId}, id, ${tagId} FROM made`.execute(db);
  const body = '<p>We have a few new listings near you this week, {{first_name}}.</p><p>Would a short call on Thursday suit you?</p>';
  const message = await sql<{ id: number }>`
    INSERT INTO templated_emails (user_id, subject, greeting_with_first_name, greeting_without_first_name, body, closing, ps_line, text, recipients)
    VALUES (${userId}, 'New listings for you, {{first_name}}', 'Hi {{first_name}},', 'Hi,', ${body}, 'Talk soon,',
            'Reply with any question.', 'Hi, new listings.', ${JSON.stringify([{ group: 'Tags', value: tagId, label: 'bulk' }])}::jsonb)
    RETURNING id`.execute(db);
  return { messageId: Number(message.rows[0]!.id), tagId, contacts: n };
}

/** Scheduled + Now, with its due job, in one transaction (as the API's create does). */
export async function scheduleNow(db: Db, queue: JobQueue, messageId: number): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const now = new Date();
    await trx
      .updateTable('templated_emails')
      .set({ status: 'Scheduled', send_type: 'Now', send_at: now, updated_at: now })
      .where('id', '=', messageId)
      .execute();
    await queue.scheduleDue(trx, { kind: 'templated_email', id: messageId, sendAt: now.toISOString() });
  });
}
