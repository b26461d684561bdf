import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import type { App } from '../../http/fastify-types.ts';
import { repliesBefore } from '../../inbound/replies.ts';
import { formatForUser, PAGE_SCHEMA, sendPage } from '../render.ts';
import { toSignIn } from '../viewer.ts';

const PER_PAGE = 25;

/** Why a reply was held, in words. */
const HELD_WORDS: Record<string, string> = {
  dmarc_fail: 'Held: its DMARC check failed (mail dressed as someone it is not), so it was not forwarded to you',
  forward_limit: 'Held: this contact had reached the day’s forwards (INBOUND_FORWARDS_PER_DAY), so it was not forwarded to you',
};

const ListQuery = Type.Object({ before: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })) });

/** A reply as a page shows it: its words as text (a reply's HTML is never kept, let alone run). */
export function replyView(row: Awaited<ReturnType<typeof repliesBefore>>[number], timeZone: string | null): Record<string, unknown> {
  const auth = row.authentication;
  return {
    id: row.id,
    from: row.from_name ? `${row.from_name} <${row.from_address}>` : row.from_address,
    contactHref: `/contacts/${row.contact_id}`,
    subject: row.subject,
    message: {
      href: `${row.message_kind === 'templated_email' ? '/emails' : '/drops'}/${row.message_id}`,
      label: `the email ${row.message_id}`,
    },
    at: formatForUser(row.received_at, timeZone),
    paragraphs: row.text.split(/\n{2,}/).filter((p) => p.trim() !== ''),
    auto: row.auto_reply,
    held: row.held_reason ? (HELD_WORDS[row.held_reason] ?? `Held: ${row.held_reason}`) : null,
    forwarded: row.forwarded_at ? formatForUser(row.forwarded_at, timeZone) : null,
    verdict: auth
      ? `SPF ${auth.spf}, DKIM ${auth.dkim}, DMARC ${auth.dmarc}${auth.from_domain ? ` for ${auth.from_domain}` : ''}`
      : 'Not checked',
  };
}

/**
 * `/replies`: every reply to the messages of the user the pages are for, newest first, paged by
 * keys — who wrote, to which message (a link to its report), when, the words as text, the
 * authentication verdict, and a held reply marked with its reason.
 */
export async function replyPages(web: App, ctx: AppContext): Promise<void> {
  const { db } = ctx.database;
  web.get('/replies', { schema: { ...PAGE_SCHEMA, querystring: ListQuery } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const { before } = request.query;
    const rows = await repliesBefore(db, viewer.owner.id, { beforeId: before, limit: PER_PAGE + 1 });
    const shown = rows.slice(0, PER_PAGE);
    return sendPage(reply, 'replies/list', {
      title: 'Replies',
      section: 'replies',
      session: viewer.session,
      replies: shown.map((row) => replyView(row, viewer.owner.time_zone)),
      first: before ? '/replies' : null,
      next: rows.length > PER_PAGE ? `/replies?before=${shown.at(-1)?.id}` : null,
    });
  });
}
