import type { CookieSerializeOptions } from '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../app-context.ts';
import type { App } from '../http/fastify-types.ts';
import { PASSWORD_MAX_LENGTH, verifyPassword } from '../identity/passwords.ts';
import { findSignInUser } from '../identity/users.ts';
import { newSignInToken, SIGN_IN_COOKIE } from './csrf.ts';
import { formatForUser, PAGE_SCHEMA, sendPage } from './render.ts';
import { endSession, graceEndsAt, SESSION_COOKIE, startSession } from './sessions.ts';
import { reserveSignInAttempt, signInSucceeded } from './sign-in-throttle.ts';
import { localPath } from './viewer.ts';

/** Unknown email, wrong password, no password set: one answer, so the form reveals no accounts. */
export const SIGN_IN_FAILED = 'The email or password is incorrect.';

/** The options of the session and sign-in cookies (`__Host-`: Secure, host-only, path /). */
export const COOKIE: CookieSerializeOptions = { path: '/', httpOnly: true, secure: true, sameSite: 'lax' };
const SIGN_IN_TOKEN = /^[\w-]{43}$/;

function formText(body: unknown, name: string): string {
  const value = (body as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value : '';
}

/** The CSRF token of a form shown without a session (sign-in, invitation): in a cookie and the form's field. */
export function signInFormToken(request: FastifyRequest, reply: FastifyReply): string {
  const existing = request.cookies[SIGN_IN_COOKIE];
  const token = existing && SIGN_IN_TOKEN.test(existing) ? existing : newSignInToken();
  reply.setCookie(SIGN_IN_COOKIE, token, { ...COOKIE, maxAge: 3600 });
  return token;
}

/** The form, with a sign-in CSRF token in a cookie and a hidden field (kept if the browser has one, so two tabs both work). */
function sendSignInForm(
  request: FastifyRequest,
  reply: FastifyReply,
  form: { email?: string; error?: string; next: string },
  status = 200,
) {
  const token = signInFormToken(request, reply);
  const data = { title: 'Sign in', email: form.email ?? '', error: form.error, signInToken: token, next: form.next };
  return sendPage(reply, 'sign-in', data, status);
}

/** `/login` and `/logout`: open to anyone; both POSTs carry a CSRF token (checked in index.ts). */
export async function signInRoutes(web: App, { database: { db }, config, clock }: AppContext): Promise<void> {
  web.get('/login', { schema: PAGE_SCHEMA }, async (request, reply) => {
    // `next`: the page a signed-out visitor asked for (a bookmark, a link in an email).
    const next = localPath((request.query as { next?: unknown }).next);
    if (request.webSession) return reply.redirect(next, 303);
    return sendSignInForm(request, reply, { next });
  });

  web.post('/login', { schema: PAGE_SCHEMA, config: { signInForm: true } }, async (request, reply) => {
    const email = formText(request.body, 'email').trim().slice(0, 254);
    const password = formText(request.body, 'password');
    const next = localPath(formText(request.body, 'next'));
    if (!email || !password) return sendSignInForm(request, reply, { email, next, error: 'Enter your email and your password.' }, 422);

    const now = clock();
    const attempt = await reserveSignInAttempt(db, email, request.ip, now);
    if (!attempt.ok) {
      request.log.warn('sign-in refused: too many failed attempts');
      reply.header('Retry-After', String(attempt.waitSeconds));
      const minutes = Math.ceil(attempt.waitSeconds / 60);
      const error = `Too many failed sign-ins. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`;
      return sendSignInForm(request, reply, { email, next, error }, 429);
    }

    const user = await findSignInUser(db, email);
    // An over-long password is checked against nothing, in the same time as any other failure.
    const usable = password.length <= PASSWORD_MAX_LENGTH;
    const matches = (await verifyPassword(usable ? password : '', usable ? user?.password_hash : null)) && user !== undefined;
    if (!matches || !user) {
      // The attempt stays reserved: it counts as a failure.
      // The email typed is not logged: people type their password into it by mistake.
      request.log.info('sign-in failed');
      return sendSignInForm(request, reply, { email, next, error: SIGN_IN_FAILED }, 422);
    }

    const graceEnd = graceEndsAt(user, config);
    if (graceEnd && now >= graceEnd) {
      request.log.info({ userId: user.id }, 'sign-in refused: account closed');
      const error = `This account was cancelled and its grace period ended on ${formatForUser(graceEnd, null)}; it can no longer sign in.`;
      return sendSignInForm(request, reply, { email, next, error }, 403);
    }

    await signInSucceeded(db, email, attempt.reserved);
    const session = await startSession(db, user.id, now);
    request.log.info({ userId: user.id }, 'signed in');
    return reply
      .setCookie(SESSION_COOKIE, session.token, { ...COOKIE, expires: session.expiresAt })
      .clearCookie(SIGN_IN_COOKIE, COOKIE)
      .redirect(next, 303);
  });

  web.post('/logout', { schema: PAGE_SCHEMA }, async (request, reply) => {
    if (request.webSession) await endSession(db, request.webSession.id);
    return reply.clearCookie(SESSION_COOKIE, COOKIE).redirect('/login', 303);
  });
}
