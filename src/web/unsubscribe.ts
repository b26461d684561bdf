import { createHash } from 'node:crypto';
import formbody from '@fastify/formbody';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.ts';
import { loadTrackingTokens } from '../email/tokens.ts';
import { recordUnsubscribe } from '../email/tracking.ts';
import type { App } from '../http/fastify-types.ts';
import { recipientStatus } from '../sending/deliveries.ts';
import { renderView } from './render.ts';

/**
 * The pages behind an email's unsubscribe link (views/unsubscribe.eta): self-contained (no session,
 * no shared assets), one inline style allowed by its hash, nothing else — and never cached, indexed or leaking the
 * token-bearing URL as a referrer.
 */
const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;color:#1f2328;max-width:34rem;margin:4rem auto;padding:0 1rem}' +
  'button{font:inherit;padding:.5rem 1.25rem;border:0;border-radius:6px;background:#1f6feb;color:#fff;cursor:pointer}';
const CSP = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`,
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

type UnsubscribeView =
  /** The GET page: a button that POSTs the one-click form to `action`. */
  { kind: 'confirm'; action: string } | { kind: 'done' } | { kind: 'already' } | { kind: 'invalid' };

const TEXT: Record<UnsubscribeView['kind'], { title: string; text: string }> = {
  confirm: { title: 'Unsubscribe?', text: 'You will no longer receive these emails at this address.' },
  done: { title: 'You are unsubscribed', text: 'You will no longer receive these emails at this address.' },
  already: { title: 'You are already unsubscribed', text: 'This address no longer receives these emails.' },
  invalid: {
    title: 'This link is not valid',
    text: 'The unsubscribe link is incomplete or was changed. Use the link in the email itself.',
  },
};

function sendUnsubscribePage(reply: FastifyReply, status: number, view: UnsubscribeView): FastifyReply {
  const { title, text } = TEXT[view.kind];
  const html = renderView('unsubscribe', { title, text, style: STYLE, action: view.kind === 'confirm' ? view.action : undefined });
  return reply
    .code(status)
    .headers({
      'Cache-Control': 'no-store',
      'Content-Security-Policy': CSP,
      'Referrer-Policy': 'no-referrer',
      'X-Robots-Tag': 'noindex',
      'X-Content-Type-Options': 'nosniff',
    })
    .type('text/html; charset=utf-8')
    .send(html);
}

const TokenParams = Type.Object({ token: Type.String() });

/** The pages are HTML for people, their 404 included (a link changed or cut short). */
const page = (description: string) => ({ description, content: { 'text/html': { schema: Type.String() } } });
const PAGE_RESPONSES = {
  200: page('The page, in HTML'),
  404: page('An HTML page saying the link is not valid (changed or incomplete)'),
};
/** What RFC 8058 one-click clients post; the signed URL alone decides, so it is accepted and not needed. */
const ONE_CLICK = Type.Object(
  { 'List-Unsubscribe': Type.Literal('One-Click') },
  { title: 'OneClickUnsubscribe', examples: [{ 'List-Unsubscribe': 'One-Click' }] },
);

/**
 * The page behind every email's unsubscribe link, outside /v3, without a key, cookie or CSRF
 * token: the signed token in the URL is the only authority (email/tokens.ts). A scope of its own,
 * so one-click form bodies are parsed here only and the JSON API keeps refusing them (415).
 *
 *   GET  /unsubscribe/:token confirmation page; does not unsubscribe
 *   POST /unsubscribe/:token RFC 8058 one-click unsubscribe (and the page's button)
 */
export async function unsubscribePages(app: App, { database: { db }, clock }: AppContext): Promise<void> {
  const tokens = await loadTrackingTokens(db, clock);
  const tags = ['Tracking'];
  // RFC 8058 clients post `List-Unsubscribe=One-Click` as a urlencoded or multipart form; the
  // signed URL alone decides, so the body is accepted and not needed.
  await app.register(formbody, { bodyLimit: 4096 });
  app.addContentTypeParser('multipart/form-data', { parseAs: 'string', bodyLimit: 4096 }, (_request, body, done) => done(null, body));

  app.get(
    '/unsubscribe/:token',
    {
      config: { public: true },
      schema: {
        tags,
        operationId: 'showUnsubscribePage',
        summary: 'Unsubscribe confirmation page (does not unsubscribe by itself)',
        security: [],
        params: TokenParams,
        response: PAGE_RESPONSES,
      },
    },
    async (request, reply) => {
      const claim = tokens.verify('unsubscribe', request.params.token);
      const status = claim && (await recipientStatus(db, claim.deliveryId));
      if (!claim || !status) return sendUnsubscribePage(reply, 404, { kind: 'invalid' });
      if (status === 'Unsubscribed') return sendUnsubscribePage(reply, 200, { kind: 'already' });
      return sendUnsubscribePage(reply, 200, { kind: 'confirm', action: `/unsubscribe/${request.params.token}` });
    },
  );

  app.post(
    '/unsubscribe/:token',
    {
      config: { public: true },
      schema: {
        tags,
        operationId: 'unsubscribe',
        summary: 'One-click unsubscribe (RFC 8058): no key, cookie or CSRF token; the signed URL is the authority. Idempotent.',
        security: [],
        params: TokenParams,
        documentedBody: {
          description:
            "The RFC 8058 form (`List-Unsubscribe=One-Click`); the page's button posts the same. Optional: the URL alone decides.",
          content: { 'application/x-www-form-urlencoded': { schema: ONE_CLICK }, 'multipart/form-data': { schema: ONE_CLICK } },
        },
        response: PAGE_RESPONSES,
      },
    },
    async (request, reply) => {
      const claim = tokens.verify('unsubscribe', request.params.token);
      if (!claim || !(await recordUnsubscribe(db, claim.deliveryId, clock()))) return sendUnsubscribePage(reply, 404, { kind: 'invalid' });
      request.log.info({ deliveryId: claim.deliveryId }, 'unsubscribed through an email link');
      return sendUnsubscribePage(reply, 200, { kind: 'done' });
    },
  );
}
