import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import helmet from '@fastify/helmet';
import type { FastifyError } from 'fastify';
import type { AppContext } from '../app-context.ts';
import { DomainError } from '../errors.ts';
import type { App } from '../http/fastify-types.ts';
import { HttpError } from '../http/problems.ts';
import { accountSettingsRoutes } from './account-settings.ts';
import { CSRF_FIELD, SIGN_IN_COOKIE, tokensMatch } from './csrf.ts';
import { homePages } from './home.ts';
import { composePages } from './pages/compose.ts';
import { dropComposePages } from './pages/compose-drops.ts';
import { composePreviewPage } from './pages/compose-preview.ts';
import { contactImportPages } from './pages/contact-import.ts';
import { contactPages } from './pages/contacts.ts';
import { dashboardPage } from './pages/dashboard.ts';
import { invitationPages } from './pages/invitation.ts';
import { messageListPages } from './pages/message-lists.ts';
import { messageReportPages } from './pages/message-reports.ts';
import { replyPages } from './pages/replies.ts';
import { suppressionPages } from './pages/suppressions.ts';
import { userPages } from './pages/users.ts';
import { webhookPages } from './pages/webhooks.ts';
import { PAGE_SCHEMA, sendMessage } from './render.ts';
import { findSession, SESSION_COOKIE, type WebSession } from './sessions.ts';
import { signInRoutes } from './sign-in.ts';
import { unsubscribePages } from './unsubscribe.ts';
import { ACTING_FOR_COOKIE, actingForRoutes, type Viewer, viewerOf } from './viewer.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A web form posted before there is a session (sign-in): its CSRF token is checked against a cookie. */
    signInForm?: boolean;
    /**
     * A multipart form (one with a file: pages/compose-drops.ts, pages/contact-import.ts): its body is read by its handler,
     * which checks the CSRF token, the form's first part, before it reads any file.
     */
    multipartForm?: boolean;
  }
  interface FastifyRequest {
    /** The signed-in browser session of a web request, or null. */
    webSession: WebSession | null;
    /** Who a signed-in page is for (viewer.ts), or null without a session. */
    viewer: Viewer | null;
  }
}

const TITLES: Record<number, string> = { 403: 'Not yours to see', 404: 'Page not found' };

const ASSETS = {
  'app.css': 'text/css; charset=utf-8',
  'copy.js': 'text/javascript; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
} as const;

/**
 * The web pages (sign-in and account settings). Everything registered here lives in this plugin's
 * encapsulated scope: form bodies, cookies, security headers and HTML error pages apply to the
 * pages only, so the JSON API keeps refusing form bodies (415) and /docs keeps its own CSP.
 */
/** Every page, each group in a scope of its own: the signed-in pages, and the unsubscribe page. */
export async function registerPages(app: App, ctx: AppContext): Promise<void> {
  await app.register(async (scope) => webPages(scope, ctx));
  await app.register(async (scope) => unsubscribePages(scope, ctx));
}

async function webPages(web: App, ctx: AppContext): Promise<void> {
  const { database, config, clock } = ctx;

  await web.register(cookie);
  await web.register(formbody, { bodyLimit: 64 * 1024 });
  await web.register(helmet, {
    // Same-origin files only, no inline script or style: an injected tag has nothing to run.
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'none'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'"],
        // The report's sandboxed email preview and a drop's audio, both served by Hopper itself.
        frameSrc: ["'self'"],
        mediaSrc: ["'self'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
      },
    },
  });
  web.decorateRequest('webSession', null);
  web.decorateRequest('viewer', null);

  // preValidation runs once the form body is parsed: every POST must carry the right token before
  // any handler sees it.
  web.addHook('preValidation', async (request, reply) => {
    if (request.routeOptions.url?.startsWith('/static/')) return;
    request.webSession = await findSession(database.db, config, request.cookies[SESSION_COOKIE], clock());
    if (request.webSession) request.viewer = await viewerOf(database.db, request.webSession, request.cookies[ACTING_FOR_COOKIE]);
    if (request.method !== 'POST') return;
    if (request.routeOptions.config.multipartForm && request.isMultipart()) return;
    const submitted = (request.body as Record<string, unknown> | undefined)?.[CSRF_FIELD];
    const expected = request.routeOptions.config.signInForm ? request.cookies[SIGN_IN_COOKIE] : request.webSession?.csrfToken;
    if (tokensMatch(submitted, expected)) return;
    request.log.info('web form refused: missing or wrong CSRF token');
    return sendMessage(
      reply,
      403,
      {
        title: 'The form could not be accepted',
        text: 'It came without its security token, from another site, or after your session ended. Reload the page and try again.',
        link: { href: '/account/settings', label: 'Back to account settings' },
      },
      request.webSession,
    );
  });

  web.setErrorHandler((error: FastifyError, request, reply) => {
    // A domain error is the problem the API would answer: 403 for another's message, 404 for none.
    const known = error instanceof DomainError ? HttpError.from(error) : error;
    const status = known instanceof HttpError ? known.status : (error.statusCode ?? 500);
    if (status >= 500) request.log.error({ err: error }, 'page failed');
    if (known instanceof HttpError) reply.headers(known.headers);
    const text = status >= 500 ? `Something went wrong on our side (error id ${request.id}).` : known.message;
    return sendMessage(
      reply,
      status,
      { title: status >= 500 ? 'Server error' : (TITLES[status] ?? 'Request refused'), text },
      request.webSession,
    );
  });

  for (const [name, type] of Object.entries(ASSETS)) {
    const body = readFileSync(join(import.meta.dirname, 'static', name));
    web.get(`/static/${name}`, { schema: PAGE_SCHEMA }, async (_request, reply) =>
      reply.type(type).header('Cache-Control', 'public, max-age=300').send(body),
    );
  }

  await signInRoutes(web, ctx);
  await accountSettingsRoutes(web, ctx);
  await actingForRoutes(web, ctx);
  await homePages(web);
  await dashboardPage(web, ctx);
  await messageListPages(web, ctx);
  await messageReportPages(web, ctx);
  await replyPages(web, ctx);
  await contactImportPages(web, ctx);
  await contactPages(web, ctx);
  await invitationPages(web, ctx);
  await suppressionPages(web, ctx);
  await userPages(web, ctx);
  await composePages(web, ctx);
  await composePreviewPage(web, ctx);
  await dropComposePages(web, ctx);
  await webhookPages(web, ctx);
}
