import formbody from '@fastify/formbody';
import { Type } from 'typebox';
import type { AppContext } from '../../context.ts';
import { loadTrackingTokens } from '../../email/tokens.ts';
import { findClickTarget, recipientStatus, recordClick, recordOpen, recordUnsubscribe } from '../../email/tracking.ts';
import { sendUnsubscribePage } from '../../web/unsubscribe-page.ts';
import type { App } from '../context.ts';
import { HttpError } from '../problems.ts';
import { problems } from '../schemas.ts';

// A transparent 1×1 GIF.
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const TokenParams = Type.Object({ token: Type.String() });

/**
 * The links inside sent emails, outside /v3 and without a key: the signed token in the URL is the
 * only authority (sending/email/tokens.ts). Registered in a scope of its own, so the form bodies of
 * one-click unsubscribe are parsed here only and the JSON API keeps refusing them (415).
 *
 * Public access:
 *   GET  /t/o/:token.gif     open pixel — always the GIF; a valid token records an open
 *   GET  /t/c/:token         click — 302 to the message's own link; anything else 404
 *   GET  /unsubscribe/:token confirmation page; does not unsubscribe
 *   POST /unsubscribe/:token RFC 8058 one-click unsubscribe (and the page's button)
 */
export async function trackingRoutes(app: App, { database: { db }, clock }: AppContext): Promise<void> {
  const tokens = await loadTrackingTokens(db);
  const tags = ['Tracking'];
  // RFC 8058 clients post `List-Unsubscribe=One-Click` as a urlencoded or multipart form; the
  // signed URL alone decides, so the body is accepted and not needed.
  await app.register(formbody, { bodyLimit: 4096 });
  app.addContentTypeParser('multipart/form-data', { parseAs: 'string', bodyLimit: 4096 }, (_request, body, done) => done(null, body));

  app.get(
    '/t/o/:token.gif',
    {
      config: { public: true },
      // A HEAD probe is not an open.
      exposeHeadRoute: false,
      schema: { tags, summary: 'Open-tracking pixel of an email (a 1×1 GIF, whatever the token)', security: [], params: TokenParams },
    },
    async (request, reply) => {
      const claim = tokens.verify('open', request.params.token);
      if (claim) {
        // The reader's image must never break: a failure to record is logged, not shown.
        try {
          await recordOpen(db, claim.deliveryId, clock());
        } catch (error) {
          request.log.error({ err: error }, 'open not recorded');
        }
      }
      return reply.type('image/gif').header('Cache-Control', 'no-store, max-age=0').send(PIXEL);
    },
  );

  app.get(
    '/t/c/:token',
    {
      config: { public: true },
      exposeHeadRoute: false,
      schema: {
        tags,
        summary: 'Click redirect of an email link (302 to the link)',
        security: [],
        params: TokenParams,
        response: problems(404),
      },
    },
    async (request, reply) => {
      const claim = tokens.verify('click', request.params.token);
      const target = claim && (await findClickTarget(db, claim.deliveryId, claim.link));
      if (!claim || !target)
        throw new HttpError('not_found', 'This link is not valid: it is incomplete, was changed, or its email no longer exists.');
      await recordClick(db, claim.deliveryId, target, clock());
      return reply.header('Cache-Control', 'no-store').header('Referrer-Policy', 'no-referrer').redirect(target, 302);
    },
  );

  app.get(
    '/unsubscribe/:token',
    {
      config: { public: true },
      schema: { tags, summary: 'Unsubscribe confirmation page (does not unsubscribe by itself)', security: [], params: TokenParams },
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
        summary: 'One-click unsubscribe (RFC 8058): no key, cookie or CSRF token; the signed URL is the authority. Idempotent.',
        security: [],
        params: TokenParams,
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
