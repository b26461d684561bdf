import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { loadTrackingTokens } from '../../email/tokens.ts';
import { findClickTarget, recordClick, recordOpen } from '../../email/tracking.ts';
import type { App } from '../fastify-types.ts';
import { HttpError } from '../problems.ts';
import { problems } from '../schemas.ts';

// A transparent 1×1 GIF.
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const TokenParams = Type.Object({ token: Type.String() });

/**
 * The tracking links inside sent emails, outside /v3 and without a key: the signed token in the URL
 * is the only authority (email/tokens.ts). The unsubscribe link is a page (web/unsubscribe.ts).
 *
 * Public access:
 *   GET  /t/o/:token.gif     open pixel — always the GIF; a valid token records an open
 *   GET  /t/c/:token         click — 302 to the message's own link; anything else 404
 */
export async function trackingRoutes(app: App, { database: { db }, clock }: AppContext): Promise<void> {
  const tokens = await loadTrackingTokens(db, clock);
  const tags = ['Tracking'];

  app.get(
    '/t/o/:token.gif',
    {
      config: { public: true },
      // A HEAD probe is not an open.
      exposeHeadRoute: false,
      schema: {
        tags,
        operationId: 'trackOpen',
        summary: 'Open-tracking pixel of an email (a 1×1 GIF, whatever the token)',
        security: [],
        params: TokenParams,
        response: {
          200: {
            description: 'A transparent 1×1 GIF',
            content: { 'image/gif': { schema: Type.Unsafe<Buffer>({ type: 'string', format: 'binary' }) } },
          },
        },
      },
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
        operationId: 'trackClick',
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
}
