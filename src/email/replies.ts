import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import type { RepliesTable } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { Id, Nullable, Timestamp } from '../json-schema.ts';
import { formatTimestamp } from '../time.ts';

/**
 * `GET /templated_emails/{id}/replies`: what contacts wrote back to a templated email, received by
 * the inbound mail receiver (inbound/). Automatic replies (out of office, …) are kept and marked,
 * but neither counted in `reply` nor forwarded to the sender.
 */
export const Reply = Type.Object({
  id: Id,
  contact_id: Id,
  delivery_id: Id,
  from_address: Type.String(),
  from_name: Nullable(Type.String()),
  subject: Type.String(),
  text: Type.String({ description: 'The plain-text body (HTML-only replies converted to text)' }),
  auto_reply: Type.Boolean({ description: 'An automatic reply (RFC 3834 Auto-Submitted, Precedence, out-of-office)' }),
  received_at: Timestamp,
});

export const REPLY_FILTERS: Filters = {
  contact_id: { kind: 'id', column: 'r.contact_id' },
  auto_reply: { kind: 'enum', column: 'r.auto_reply', values: ['true', 'false'] },
};

type ReplyRow = {
  id: number;
  contact_id: number;
  delivery_id: number;
  from_address: string;
  from_name: string | null;
  subject: string;
  text: string;
  auto_reply: boolean;
  received_at: Date;
};

/** One page of the replies to one message, filtered by `REPLY_FILTERS`. */
export function searchReplies(db: Db, message: { id: number; user_id: number }, params: SearchParams) {
  const query = db
    .selectFrom('replies as r')
    .select([
      'r.id',
      'r.contact_id',
      'r.delivery_id',
      'r.from_address',
      'r.from_name',
      'r.subject',
      'r.text',
      'r.auto_reply',
      'r.received_at',
    ])
    .where('r.user_id', '=', message.user_id)
    .where('r.message_kind', '=', 'templated_email')
    .where('r.message_id', '=', message.id);
  return runSearch(query, REPLY_FILTERS, params, 'r.id');
}

export function toApiReply(row: ReplyRow) {
  return {
    id: row.id,
    contact_id: row.contact_id,
    delivery_id: row.delivery_id,
    from_address: row.from_address,
    from_name: row.from_name,
    subject: row.subject,
    text: row.text,
    auto_reply: row.auto_reply,
    received_at: formatTimestamp(row.received_at) as string,
  };
}

export type NewReply = Omit<RepliesTable, 'id' | 'forwarded_at'>;
