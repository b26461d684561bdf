import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import type { App } from '../../http/fastify-types.ts';
import { acceptInvitation, findInvitation } from '../../identity/invitations.ts';
import { emptyForm, type Form, submitForm } from '../forms.ts';
import { PAGE_SCHEMA, sendMessage, sendPage } from '../render.ts';
import { signInFormToken } from '../sign-in.ts';

const TokenParams = Type.Object({ token: Type.String({ maxLength: 100 }) });
const GONE = {
  title: 'This invitation cannot be used',
  text: 'The link is unknown, was used already, or has expired (after 7 days). Ask whoever created your account for a new one.',
  link: { href: '/login', label: 'Sign in' },
};

/**
 * `/invitation/{token}`: a new user sets their own first password through the one-time link whoever
 * may manage them made (`POST /v3/users/{id}/invitation`, identity/invitations.ts). Open without a
 * session, so its form carries the sign-in form's CSRF token (a cookie and the field, equal).
 */
export async function invitationPages(web: App, { database: { db }, clock }: AppContext): Promise<void> {
  web.get('/invitation/:token', { schema: { ...PAGE_SCHEMA, params: TokenParams } }, async (request, reply) => {
    const invitation = await findInvitation(db, request.params.token, clock());
    if (!invitation) return sendMessage(reply, 404, GONE, request.webSession);
    return sendInvitation(request, reply, invitation.email, emptyForm());
  });

  web.post(
    '/invitation/:token',
    { config: { signInForm: true }, schema: { ...PAGE_SCHEMA, params: TokenParams } },
    async (request, reply) => {
      const invitation = await findInvitation(db, request.params.token, clock());
      if (!invitation) return sendMessage(reply, 404, GONE, request.webSession);
      const raw = (request.body as Record<string, unknown> | undefined)?.password;
      const password = typeof raw === 'string' ? raw : '';
      const outcome = await submitForm({}, { password: 'New password' }, () =>
        acceptInvitation(db, request.params.token, password, clock()),
      );
      if (!outcome.ok) return sendInvitation(request, reply, invitation.email, outcome.form, 422);
      if (outcome.result === undefined) return sendMessage(reply, 404, GONE, request.webSession);
      request.log.info({ userId: outcome.result }, 'first password set through an invitation');
      return reply.redirect('/login', 303);
    },
  );
}

function sendInvitation(request: FastifyRequest, reply: FastifyReply, email: string, form: Form, status = 200) {
  const data = { title: 'Set your password', email, form, signInToken: signInFormToken(request, reply), action: request.url };
  return sendPage(reply, 'invitation/set-password', data, status);
}
