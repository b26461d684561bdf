import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.ts';
import { DomainError } from '../errors.ts';
import type { App } from '../http/fastify-types.ts';
import { createApiKey, findLiveApiKey, KEY_NAME_MAX_LENGTH, liveApiKeys, revokeApiKey, toApiKey } from '../identity/api-keys.ts';
import { changeOwnPassword, changeOwnTimeZone, changeSender, findUser, toApiUser } from '../identity/users.ts';
import { Id } from '../json-schema.ts';
import { setFlash, takeFlash } from './flash.ts';
import { emptyForm, type Form, formValues, submitForm } from './forms.ts';
import { formatForUser, PAGE_SCHEMA, sendMessage, sendPage } from './render.ts';
import { graceEndsAt, SESSION_COOKIE, startSession, type WebSession } from './sessions.ts';
import { COOKIE } from './sign-in.ts';

const INTEGRATIONS = '/account/settings/integrations';
/** The sender form's fields, in the page's order, with their labels (the errors name them so). */
const SENDER_LABELS = { sender_name: 'Sender name', sender_email: 'Sender email', postal_address: 'Postal address' };
const PASSWORD_LABELS = { current_password: 'Current password', new_password: 'New password' };
const PROFILE_NOTICES = {
  password: 'Your password was changed. Every other browser signed in as you has been signed out.',
  'time-zone': 'Your time zone was saved.',
} as const;
/** Every IANA time zone the runtime knows, for the time zone list. */
const TIME_ZONES = Intl.supportedValuesOf('timeZone');
const NoticeQuery = Type.Object({ saved: Type.Optional(Type.String()), notice: Type.Optional(Type.String()) });

interface ProfileForms {
  form?: Form;
  passwordForm?: Form;
  zoneForm?: Form;
}
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
export function tabData(session: WebSession, tab: 'profile' | 'integrations' | 'webhooks', config: AppContext['config']) {
  const graceEnd = graceEndsAt(session.user, config);
  return { session, section: 'settings' as const, tab, graceEnd: graceEnd && formatForUser(graceEnd, session.user.time_zone) };
}

/** The profile tab: who the user is, the sender identity of their emails, their password and time zone. */
function profileRoutes(web: App, { database: { db }, config, clock }: AppContext): void {
  web.get('/account/settings', { schema: { ...PAGE_SCHEMA, querystring: NoticeQuery } }, async (request, reply) => {
    const session = request.webSession;
    if (!session) return reply.redirect('/login', 303);
    const query = request.query as { saved?: string; notice?: string };
    const notice = query.saved !== undefined ? 'Saved.' : PROFILE_NOTICES[query.notice as keyof typeof PROFILE_NOTICES];
    return sendProfile(reply, session, { notice });
  });

  async function sendProfile(reply: FastifyReply, session: WebSession, extra: { notice?: string } & ProfileForms = {}, status = 200) {
    let form = extra.form;
    if (!form) {
      const user = await findUser(db, session.user.id);
      const sender = user ? toApiUser(user) : { sender_name: '', sender_email: '', postal_address: null };
      form = emptyForm({ sender_name: sender.sender_name, sender_email: sender.sender_email, postal_address: sender.postal_address ?? '' });
    }
    const passwordForm = extra.passwordForm ?? emptyForm();
    const zoneForm = extra.zoneForm ?? emptyForm({ time_zone: session.user.time_zone ?? '' });
    return sendPage(
      reply,
      'settings-profile',
      {
        title: 'Profile',
        ...tabData(session, 'profile', config),
        user: session.user,
        notice: extra.notice,
        form,
        passwordForm,
        zoneForm,
        zones: TIME_ZONES,
      },
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

  // One's own password, never another's: the current one is required. Every session of the user
  // ends (as a new password through the API does); this browser gets a new one and stays signed in.
  web.post('/account/settings/password', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const session = request.webSession as WebSession;
    const body = request.body as Record<string, unknown> | undefined;
    const raw = (name: string) => (typeof body?.[name] === 'string' ? (body[name] as string) : '');
    const values = { current_password: raw('current_password'), new_password: raw('new_password') };
    const outcome = await submitForm(values, PASSWORD_LABELS, () => changeOwnPassword(db, session.user.id, values, clock()));
    // A password is never sent back into the page.
    if (!outcome.ok) return sendProfile(reply, session, { passwordForm: { values: {}, errors: outcome.form.errors } }, 422);
    const fresh = await startSession(db, session.user.id, clock());
    request.log.info({ userId: session.user.id }, 'password changed from the web');
    return reply
      .setCookie(SESSION_COOKIE, fresh.token, { ...COOKIE, expires: fresh.expiresAt })
      .redirect('/account/settings?notice=password', 303);
  });

  web.post('/account/settings/time-zone', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const session = request.webSession as WebSession;
    const values = formValues(request.body, ['time_zone']);
    const outcome = await submitForm(values, { time_zone: 'Time zone' }, () =>
      changeOwnTimeZone(db, session.user.id, values.time_zone ?? '', clock()),
    );
    if (!outcome.ok) return sendProfile(reply, session, { zoneForm: outcome.form }, 422);
    return reply.redirect('/account/settings?notice=time-zone', 303);
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
