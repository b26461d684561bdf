import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { createMailTransport, type MailTransport } from '../../email/transport.ts';
import { DomainError } from '../../errors.ts';
import type { App } from '../../http/fastify-types.ts';
import { discardReply, heldReplyFor, releaseHeldReply } from '../../inbound/held-replies.ts';
import { repliesBefore } from '../../inbound/replies.ts';
import { formatForUser, PAGE_SCHEMA, sendMessage, sendPage } from '../render.ts';
import { toSignIn } from '../viewer.ts';

const PER_PAGE = 25;

/** Why a reply was held, in words. */
const HELD_WORDS: Record<string, string> = {
  dmarc_fail: 'Held: its DMARC check failed (mail dressed as someone it is not), so it was not forwarded to you',
  forward_limit: 'Held: this contact had reached the day’s forwards (INBOUND_FORWARDS_PER_DAY), so it was not forwarded to you',
};

const DONE = ['released', 'discarded', 'unchanged'] as const;
const ListQuery = Type.Object({
  before: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
  done: Type.Optional(Type.Union(DONE.map((d) => Type.Literal(d)))),
});
const DONE_WORDS: Record<(typeof DONE)[number], string> = {
  released: 'The reply was forwarded to you.',
  discarded: 'The reply was discarded: it will never be forwarded.',
  unchanged: 'Nothing changed: that reply had already been released, discarded or forwarded.',
};
const ReplyParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });
const ACTIONS = {
  release: { title: 'Release this reply?', button: 'Release and forward it to me' },
  discard: { title: 'Discard this reply?', button: 'Discard it' },
} as const;

type ReplyRow = Awaited<ReturnType<typeof repliesBefore>>[number];

/** What became of a held reply, in words: released (and forwarded), discarded, or still waiting (null). */
function decision(row: Pick<ReplyRow, 'released_at' | 'discarded_at' | 'forwarded_at'>, timeZone: string | null): string | null {
  if (row.discarded_at) return `Discarded ${formatForUser(row.discarded_at, timeZone)}: it will never be forwarded`;
  if (row.released_at) {
    return row.forwarded_at
      ? `Released ${formatForUser(row.released_at, timeZone)} and forwarded to you`
      : `Released ${formatForUser(row.released_at, timeZone)}; the forward has not gone yet`;
  }
  return null;
}

/** A reply as a page shows it: its words as text (a reply's HTML is never kept, let alone run). */
export function replyView(row: ReplyRow, timeZone: string | null): Record<string, unknown> {
  const auth = row.authentication;
  const decided = row.held_reason ? decision(row, timeZone) : null;
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
    decided,
    // Release and Discard, while a held reply waits for the agent's word.
    actions:
      row.held_reason && !decided && !row.forwarded_at
        ? { release: `/replies/${row.id}/release`, discard: `/replies/${row.id}/discard` }
        : null,
    forwarded: row.forwarded_at ? formatForUser(row.forwarded_at, timeZone) : null,
    verdict: auth
      ? `SPF ${auth.spf}, DKIM ${auth.dkim}, DMARC ${auth.dmarc}${auth.from_domain ? ` for ${auth.from_domain}` : ''}`
      : 'Not checked',
  };
}

/**
 * `/replies`: every reply to the messages of the user the pages are for, newest first, paged by
 * keys — who wrote, to which message (a link to its report), when, the words as text, the
 * authentication verdict, and a held reply marked with its reason, with Release and Discard.
 */
export async function replyPages(web: App, ctx: AppContext): Promise<void> {
  const { db } = ctx.database;
  web.get('/replies', { schema: { ...PAGE_SCHEMA, querystring: ListQuery } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const { before, done } = request.query;
    const rows = await repliesBefore(db, viewer.owner.id, { beforeId: before, limit: PER_PAGE + 1 });
    const shown = rows.slice(0, PER_PAGE);
    return sendPage(reply, 'replies/list', {
      title: 'Replies',
      section: 'replies',
      session: viewer.session,
      replies: shown.map((row) => replyView(row, viewer.owner.time_zone)),
      done: done ? DONE_WORDS[done] : null,
      first: before ? '/replies' : null,
      next: rows.length > PER_PAGE ? `/replies?before=${shown.at(-1)?.id}` : null,
    });
  });
  heldReplyPages(web, ctx);
}

/**
 * Release and Discard of a held reply, each a confirmation page (a GET that changes nothing) and a
 * POST answered with a redirect. Release forwards through the relay from this process (its own
 * transport, made at the first release), as the receiver's forward does (inbound/held-replies.ts).
 */
function heldReplyPages(web: App, ctx: AppContext): void {
  const { db } = ctx.database;
  let transport: MailTransport | undefined;
  const mail = () => {
    transport ??= createMailTransport(ctx.config, ctx.clock, web.log);
    return transport;
  };
  web.addHook('onClose', async () => transport?.close());

  for (const action of ['release', 'discard'] as const) {
    web.get(`/replies/:id/${action}`, { schema: { ...PAGE_SCHEMA, params: ReplyParams } }, async (request, reply) => {
      const viewer = request.viewer;
      if (!viewer) return toSignIn(request, reply);
      const row = await heldReplyFor({ db }, viewer.principal, request.params.id);
      const view = replyView(row, viewer.owner.time_zone);
      return sendPage(reply, 'replies/confirm', {
        ...ACTIONS[action],
        section: 'replies',
        session: viewer.session,
        action,
        reply: view,
        dmarcFail: row.held_reason === 'dmarc_fail',
      });
    });
  }

  web.post('/replies/:id/release', { schema: { ...PAGE_SCHEMA, params: ReplyParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    let done: 'released' | 'unchanged';
    try {
      done = await releaseHeldReply({ db, config: ctx.config, transport: mail(), clock: ctx.clock }, viewer.principal, request.params.id);
    } catch (error) {
      if (error instanceof DomainError) throw error;
      request.log.warn({ err: error, reply: request.params.id }, 'a released reply could not be forwarded');
      return sendMessage(
        reply,
        503,
        {
          title: 'The reply could not be forwarded',
          text: 'The mail relay did not take it. It is still held: try Release again in a few minutes.',
          link: { href: `/replies/${request.params.id}/release`, label: 'Try again' },
        },
        viewer.session,
      );
    }
    return reply.redirect(`/replies?done=${done}#reply-${request.params.id}`, 303);
  });

  web.post('/replies/:id/discard', { schema: { ...PAGE_SCHEMA, params: ReplyParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const done = await discardReply({ db, clock: ctx.clock }, viewer.principal, request.params.id);
    return reply.redirect(`/replies?done=${done}#reply-${request.params.id}`, 303);
  });
}
