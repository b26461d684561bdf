import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../app-context.ts';
import type { Db } from '../db/database.ts';
import type { UserRow } from '../db/schema.ts';
import { DomainError } from '../errors.ts';
import type { App } from '../http/fastify-types.ts';
import { type Principal, requireReachableUser, rightsOf } from '../identity/access.ts';
import { RANK } from '../identity/roles.ts';
import { findUser, fullName, searchUsers } from '../identity/users.ts';
import { PAGE_SCHEMA } from './render.ts';
import type { WebSession } from './sessions.ts';

/**
 * Who a signed-in page is for. The session's user is the principal, with the rights an API key of
 * theirs would have (`rightsOf`); a Team Administrator or an Administrator may act for a user they
 * reach — the one access rule of identity/access.ts, checked again on every request, so a cookie
 * naming anyone else is ignored. Pages show the acting-for user's emails, drops and contacts; a
 * page on one id (`/emails/7`) checks the id against the principal, as the API does.
 */
export const ACTING_FOR_COOKIE = '__Host-hopper_acting_for';
/** The users a switcher lists at most; an Administrator of a bigger installation types an id. */
const SWITCHER_LIMIT = 100;

export interface Viewer {
  readonly session: WebSession;
  readonly principal: Principal;
  /** The user whose data the pages show: the session's own, or one they chose to act for. */
  readonly owner: Pick<UserRow, 'id' | 'first_name' | 'last_name' | 'email' | 'team_id' | 'roles' | 'time_zone'>;
  /** Whether the session may act for others (the switcher is shown). */
  readonly canSwitch: boolean;
  /** The users the switcher offers, the session's own first; empty when it may not switch. */
  readonly switchable: readonly { id: number; label: string }[];
}

function principalOf(session: WebSession): Principal {
  return rightsOf(session.user);
}

/** The viewer of a signed-in request: the acting-for cookie honoured only if the access rule allows it. */
export async function viewerOf(db: Db, session: WebSession, actingFor: string | undefined): Promise<Viewer> {
  const principal = principalOf(session);
  const canSwitch = principal.rank >= RANK['Team Administrator'];
  if (!canSwitch) return { session, principal, owner: session.user, canSwitch, switchable: [] };
  const switchable = await switchableUsers(db, principal, session);
  const id = Number(actingFor);
  if (Number.isSafeInteger(id) && id > 0 && id !== session.user.id) {
    const target = await findUser(db, id);
    try {
      return { session, principal, owner: requireReachableUser(principal, target, id), canSwitch, switchable };
    } catch {
      // A user since moved out of reach, or deleted: the session's own data again.
    }
  }
  return { session, principal, owner: session.user, canSwitch, switchable };
}

/** The users a switcher offers (the session's own first), by the same rule as `GET /v3/users`. */
async function switchableUsers(db: Db, principal: Principal, session: WebSession): Promise<{ id: number; label: string }[]> {
  const { rows } = await searchUsers(db, principal, { per_page: SWITCHER_LIMIT, status: ['Active'] });
  const self = session.user;
  const others = rows.filter((row) => row.id !== self.id).map((row) => ({ id: row.id, label: `${fullName(row)} (${row.email})` }));
  return [{ id: self.id, label: `Myself (${fullName(self)})` }, ...others];
}

/**
 * Chooses whom to act for. Refused (403) unless the access rule lets the session reach that user;
 * choosing oneself clears the choice.
 */
async function chooseActingFor(db: Db, session: WebSession, reply: FastifyReply, id: number): Promise<void> {
  if (id === session.user.id) {
    reply.clearCookie(ACTING_FOR_COOKIE, { path: '/', secure: true, httpOnly: true, sameSite: 'lax' });
    return;
  }
  requireReachableUser(principalOf(session), await findUser(db, id), id);
  reply.setCookie(ACTING_FOR_COOKIE, String(id), { path: '/', secure: true, httpOnly: true, sameSite: 'lax' });
}

/**
 * A path of this site to come back to after a form or a sign-in: absolute, on this host, never
 * `//host` or `/\host` (which browsers read as another site); '/' otherwise.
 */
export function localPath(value: unknown): string {
  return typeof value === 'string' && /^\/(?![/\\])[^\s]*$/.test(value) && value.length <= 2000 ? value : '/';
}

/** A signed-out visitor of a signed-in page goes to the sign-in form, which brings them back here. */
export function toSignIn(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.redirect(`/login?next=${encodeURIComponent(request.url)}`, 303);
}

/** `POST /acting-for`: the switcher's form (CSRF-checked like every form), back to the page it was on. */
export async function actingForRoutes(web: App, { database: { db } }: AppContext): Promise<void> {
  web.post('/acting-for', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const session = request.webSession as WebSession;
    const body = (request.body ?? {}) as Record<string, unknown>;
    const id = Number(body.user_id);
    if (!Number.isSafeInteger(id) || id < 1)
      throw new DomainError('validation', 'Choose a user to act for.', { user_id: ['must be a user'] });
    await chooseActingFor(db, session, reply, id);
    return reply.redirect(localPath(body.return_to), 303);
  });
}
