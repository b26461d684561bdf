import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { DEFAULT_PER_PAGE } from '../../db/search.ts';
import type { App } from '../../http/fastify-types.ts';
import { requireRank, requireReachableUser } from '../../identity/access.ts';
import { createInvitation } from '../../identity/invitations.ts';
import { RANK } from '../../identity/roles.ts';
import { findUser, fullName, searchUsers } from '../../identity/users.ts';
import { Id } from '../../json-schema.ts';
import { setFlash, takeFlash } from '../flash.ts';
import { formatForUser, PAGE_SCHEMA, sendPage } from '../render.ts';
import { toSignIn, type Viewer } from '../viewer.ts';

const ListQuery = Type.Object({ page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })) });
const UserParams = Type.Object({ id: Id });

/** Only those who may manage others see the page: a User gets 403. */
function requireManager(viewer: Viewer): void {
  requireRank(viewer.principal, RANK['Team Administrator'], 'manage users');
}

/**
 * `/users`, for Team Administrators and Administrators: the users they may manage (the `manage`
 * strength of identity/access.ts: an Administrator everyone, a Team Administrator themself and
 * their teammates of a lower role), each with role and status, and for an active user without a
 * password a **Send invitation** button: `POST /v3/users/{id}/invitation`'s own `createInvitation`
 * makes the one-time link, which waits sealed on the session (flash.ts) for the page the POST
 * redirects to, and is shown there once, to copy.
 */
export async function userPages(web: App, ctx: AppContext): Promise<void> {
  const { db } = ctx.database;

  web.get('/users', { schema: { ...PAGE_SCHEMA, querystring: ListQuery } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    requireManager(viewer);
    const { page = 1 } = request.query;
    const result = await searchUsers(db, viewer.principal, { page, per_page: DEFAULT_PER_PAGE }, 'manage');
    const lastPage = Math.max(1, Math.ceil(result.total / result.perPage));
    const { invitation } = await takeFlash(db, viewer.session, ctx.clock());
    const timeZone = viewer.session.user.time_zone;
    return sendPage(reply, 'users/list', {
      title: 'Users',
      section: 'users',
      session: viewer.session,
      rows: result.rows.map((row) => ({
        id: row.id,
        name: fullName(row),
        email: row.email,
        roles: row.roles.join(', '),
        status: row.status,
        self: row.id === viewer.session.user.id,
        password: row.password_hash !== null,
        invitable: row.password_hash === null && row.status === 'Active',
      })),
      invitation: invitation ? { ...invitation, expires: formatForUser(new Date(invitation.expiresAt), timeZone) } : null,
      total: result.total,
      page: result.page,
      lastPage,
      prev: result.page > 1 ? `/users?page=${result.page - 1}` : null,
      next: result.page < lastPage ? `/users?page=${result.page + 1}` : null,
    });
  });

  // Answered with a redirect: a reload repeats the GET, never this POST (which would replace the link).
  web.post('/users/:id/invitation', { schema: { ...PAGE_SCHEMA, params: UserParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    requireManager(viewer);
    const id = request.params.id;
    // As the API's route: a user out of reach is 403 (404 only for an Administrator), then the manage rule.
    const target = requireReachableUser(viewer.principal, await findUser(db, id), id);
    const made = await createInvitation(db, viewer.principal, target, ctx.config.publicUrl, ctx.clock());
    await setFlash(
      db,
      viewer.session,
      { invitation: { userId: id, name: fullName(target), url: made.url, expiresAt: made.expires_at } },
      ctx.clock(),
    );
    request.log.info({ userId: viewer.session.user.id, invited: id }, 'invitation made from the web');
    return reply.redirect('/users', 303);
  });
}
