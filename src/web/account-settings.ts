import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.ts';
import { DomainError } from '../errors.ts';
import type { App } from '../http/fastify-types.ts';
import { createApiKey, findLiveApiKey, KEY_NAME_MAX_LENGTH, liveApiKeys, revokeApiKey, toApiKey } from '../identity/api-keys.ts';
import { changeSender, findUser, toApiUser } from '../identity/users.ts';
import { Id } from '../json-schema.ts';
import { setFlash, takeFlash } from './flash.ts';
import { emptyForm, type Form, formValues, submitForm } from './forms.ts';
import { formatForUser, PAGE_SCHEMA, sendMessage, sendPage } from './render.ts';
import { graceEndsAt, type WebSession } from './sessions.ts';

const INTEGRATIONS = '/account/settings/integrations';
/** The sender form's fields, in the page's order, with their labels (the errors name them so). */
const SENDER_LABELS = { sender_name: 'Sender name', sender_email: 'Sender email', postal_address: 'Postal address' };
/** Notices a redirect may ask for by name: the page never echoes text from the URL. */
const NOTICES = { revoked: 'The key was revoked. Programs using it are refused from their next request on.' } as const;

/**
 * `/account/settings`: the signed-in user's own account. Every query is scoped to the session's
 * user, whatever their role: a Team Administrator manages teammates' keys through the API, and
 * sees only their own here.
 */
export async function accountSettingsRoutes(web: App, ctx: AppContext): Promise<void> {
  profileRoutes(web, ctx);
  integrationRoutes(web, ctx);
}

/** What every tab of the settings shows: the session, the tab, and the end of a cancelled account's grace period. */
function tabData(session: WebSession, tab: 'profile' | 'integrations', config: AppContext['config']) {
  const graceEnd = graceEndsAt(session.user, config);
  return { session, section: 'settings' as const, tab, graceEnd: graceEnd && formatForUser(graceEnd, session.user.time_zone) };
}

/** The profile tab: who the user is, and the sender identity of their emails. */
function profileRoutes(web: App, { database: { db }, config, clock }: AppContext): void {
  web.get('/account/settings', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const session = request.webSession;
    if (!session) return reply.redirect('/login', 303);
    const notice = request.query && (request.query as { saved?: string }).saved !== undefined ? 'Saved.' : undefined;
    return sendProfile(reply, session, { notice });
  });

  async function sendProfile(reply: FastifyReply, session: WebSession, extra: { notice?: string; form?: Form } = {}, status = 200) {
    let form = extra.form;
    if (!form) {
      const user = await findUser(db, session.user.id);
      const sender = user ? toApiUser(user) : { sender_name: '', sender_email: '', postal_address: null };
      form = emptyForm({ sender_name: sender.sender_name, sender_email: sender.sender_email, postal_address: sender.postal_address ?? '' });
    }
    return sendPage(
      reply,
      'settings-profile',
      { title: 'Profile', ...tabData(session, 'profile', config), user: session.user, notice: extra.notice, form },
      status,
    );
  }

  // The sender identity (name, address, postal address) of the signed-in user's emails.
  web.post('/account/settings/sender', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const session = request.webSession as WebSession;
    const values = formValues(request.body, Object.keys(SENDER_LABELS));
    const { sender_name = '', sender_email = '', postal_address = '' } = values;
    const outcome = await submitForm(values, SENDER_LABELS, () =>
      changeSender(db, session.user.id, { sender_name, sender_email, postal_address }, clock()),
    );
    if (!outcome.ok) return sendProfile(reply, session, { form: outcome.form }, 422);
    return reply.redirect('/account/settings?saved', 303);
  });
}

/** The integrations tab: the user's live API keys, a new one made, one revoked. */
function integrationRoutes(web: App, { database: { db }, config, clock }: AppContext): void {
  async function sendIntegrations(
    reply: FastifyReply,
    session: WebSession,
    extra: { newKey?: { name: string; key: string }; nameError?: string; notice?: string; name?: string } = {},
    status = 200,
  ) {
    const rows = await liveApiKeys(db, session.user.id);
    const keys = rows.map((row) => ({
      ...toApiKey(row),
      created: formatForUser(row.created_at, session.user.time_zone),
      lastUsed: formatForUser(row.last_used_at, session.user.time_zone),
    }));
    return sendPage(
      reply,
      'settings-integrations',
      { title: 'Integrations', ...tabData(session, 'integrations', config), keys, ...extra },
      status,
    );
  }

  web.get(
    INTEGRATIONS,
    { schema: { ...PAGE_SCHEMA, querystring: Type.Object({ notice: Type.Optional(Type.String()) }) } },
    async (request, reply) => {
      const session = request.webSession;
      if (!session) return reply.redirect('/login', 303);
      const notice = NOTICES[request.query.notice as keyof typeof NOTICES];
      const { newKey } = await takeFlash(db, session, clock());
      return sendIntegrations(reply, session, { notice, newKey });
    },
  );

  // Answered with a redirect, so a reload repeats the GET, never this POST (a second key). The key
  // waits for that GET sealed on the session (flash.ts), and is shown once.
  web.post(`${INTEGRATIONS}/api-keys`, { schema: PAGE_SCHEMA }, async (request, reply) => {
    // A POST reaches a handler only with a session: the CSRF check in index.ts needs one.
    const session = request.webSession as WebSession;
    const graceEnd = graceEndsAt(session.user, config);
    if (graceEnd) {
      return sendMessage(
        reply,
        403,
        {
          title: 'Account cancelled',
          text: 'A cancelled account cannot generate API keys.',
          link: { href: INTEGRATIONS, label: 'Back to Integrations' },
        },
        session,
      );
    }
    const raw = (request.body as Record<string, unknown> | undefined)?.name;
    const name = typeof raw === 'string' ? raw.trim() : '';
    if (!name || name.length > KEY_NAME_MAX_LENGTH) {
      const nameError = name ? `The name must be at most ${KEY_NAME_MAX_LENGTH} characters.` : 'Give the key a name.';
      return sendIntegrations(reply, session, { nameError, name }, 422);
    }
    let created: Awaited<ReturnType<typeof createApiKey>>;
    try {
      created = await createApiKey(db, session.user.id, name, { createdBy: session.user.id, now: clock(), limit: config.apiKeysPerUser });
    } catch (error) {
      if (error instanceof DomainError && error.code === 'conflict')
        return sendIntegrations(reply, session, { nameError: error.message, name }, 409);
      throw error;
    }
    const { key, row } = created;
    request.log.info({ userId: session.user.id, keyId: row.id }, 'API key generated from the web');
    await setFlash(db, session, { newKey: { name, key } }, clock());
    return reply.redirect(INTEGRATIONS, 303);
  });

  web.post(
    `${INTEGRATIONS}/api-keys/:id/revoke`,
    { schema: { ...PAGE_SCHEMA, params: Type.Object({ id: Id }) } },
    async (request, reply) => {
      const session = request.webSession as WebSession;
      const found = await findLiveApiKey(db, request.params.id);
      if (!found || found.row.user_id !== session.user.id) {
        return sendMessage(
          reply,
          404,
          {
            title: 'No such key',
            text: 'You have no live API key with that id.',
            link: { href: INTEGRATIONS, label: 'Back to Integrations' },
          },
          session,
        );
      }
      await revokeApiKey(db, found, clock());
      request.log.info({ userId: session.user.id, keyId: found.row.id }, 'API key revoked from the web');
      return reply.redirect(`${INTEGRATIONS}?notice=revoked`, 303);
    },
  );
}
