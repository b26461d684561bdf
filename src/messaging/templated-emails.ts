import { compile } from 'html-to-text';
import { type SqlBool, sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { precompiled } from '../db/precompiled.ts';
import type { TemplatedEmailRow } from '../db/schema.ts';
import { formatTimestamp } from '../time.ts';
import { type MessageView, selectMessages, toMessageView } from './message-view.ts';

export type EmailView = MessageView<TemplatedEmailRow>;

// Compiled once: `convert` compiles its options on every call, which costs far more than the
// conversion itself (it was most of the CPU of sending an email).
const toText = compile({
  wordwrap: false,
  selectors: [
    { selector: 'a', options: { hideLinkHrefIfSameAsText: true } },
    { selector: 'img', format: 'skip' },
  ],
});

/** Plain text of email HTML: links keep their address, no hard wrapping (mail clients wrap). */
export function htmlToText(html: string): string {
  return toText(html).trim();
}

/**
 * The `text` of a templated email: greeting (the form without a first name, as no contact is
 * known yet), body, closing with the signature under it, and the P.S. line — paragraphs apart.
 */
export function renderEmailText(
  parts: { greeting_without_first_name: string; body: string; closing: string; ps_line: string },
  signatureHtml: string | null,
): string {
  const closing = [parts.closing.trim(), signatureHtml ? htmlToText(signatureHtml) : ''].filter(Boolean).join('\n');
  const ps = parts.ps_line.trim() ? `P.S. ${parts.ps_line.trim()}` : '';
  return [parts.greeting_without_first_name.trim(), htmlToText(parts.body), closing, ps].filter(Boolean).join('\n\n');
}

export function selectEmails(db: Db) {
  return selectMessages(db, 'templated_email');
}

// The read of every GET, PUT and DELETE: compiled once, not per request.
const emailById = precompiled<[number], object>(1, (db, id) => selectEmails(db).where('msg.id', '=', id));

export async function findEmail(db: Db, id: number): Promise<EmailView | undefined> {
  const [joined] = await emailById(db, id);
  return joined && toMessageView<TemplatedEmailRow>(joined);
}

const emailsByIds = precompiled<[number[]], object>(1, (db, ids) => selectEmails(db).where(sql<SqlBool>`msg.id = any(${ids}::bigint[])`));

/** The live templated emails among `ids` as `selectEmails` rows, in no particular order: the rows of a search page. */
export async function findEmailRows(db: Db, ids: number[]): Promise<object[]> {
  return ids.length > 0 ? emailsByIds(db, ids) : [];
}

/** The API shape of a templated email (the specification's table): the one place they become JSON. */
export function toApiTemplatedEmail(view: EmailView) {
  const { row } = view;
  return {
    id: row.id,
    templated_message_id: row.templated_message_id,
    subject: row.subject,
    description: row.description,
    greeting_with_first_name: row.greeting_with_first_name,
    greeting_without_first_name: row.greeting_without_first_name,
    body: row.body,
    closing: row.closing,
    ps_line: row.ps_line,
    text: row.text,
    signature_id: row.signature_id,
    status: row.status,
    send_type: row.send_type,
    send_at: formatTimestamp(row.send_at),
    sending_at: formatTimestamp(row.sending_at),
    sent_at: formatTimestamp(row.sent_at),
    recipients: row.recipients,
    // Accepted and applied, but never shown: the specification's responses carry null.
    exclusions: null,
    source: row.source,
    reporting: view.reporting,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatTimestamp(row.deleted_at),
  };
}
