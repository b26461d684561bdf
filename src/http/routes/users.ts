import type { Db } from '../../db/database.ts';
import { createInvitation, Invitation } from '../../identity/invitations.ts';
import {
  CreateUserBody,
  cancelUser,
  changeUser,
  createUser,
  searchUsers,
  toApiUser,
  UpdateUserBody,
  USER_FILTERS,
  User,
} from '../../identity/users.ts';
import { resumeUserSending } from '../../sending/brakes.ts';
import { created } from '../created.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems } from '../schemas.ts';

/** Users: listing and reading follow the access rule; who may change what is in identity/users.ts. */
export const userRoutes: RoutePlugin = async (app, { database: { db }, config, clock, queue }) => {
  const tags = ['Users'];
  const errors = problems(...AUTHENTICATED_ERRORS);
  // A create or an update may name an email another user has.
  const writeErrors = problems(...AUTHENTICATED_ERRORS, 409);

  app.get(
    '/users',
    {
      schema: {
        tags,
        summary: 'Search the users you may reach',
        querystring: searchQuery(USER_FILTERS),
        response: { 200: envelopeSchema(User), ...errors },
      },
    },
    async (request) => envelope(await searchUsers(db, request.principal, request.query), toApiUser, request, config.publicUrl),
  );

  app.post(
    '/users',
    {
      schema: {
        tags,
        summary: 'Create a user (Administrator, or Team Administrator for their team)',
        body: CreateUserBody,
        response: { 201: User, ...writeErrors },
      },
    },
    async (request, reply) => {
      const row = await createUser(db, request.principal, request.body, clock());
      return created(reply, `${config.publicUrl}/v3/users/${row.id}`, toApiUser(row));
    },
  );

  app.get(
    '/users/:id',
    { config: { owner: 'id' }, schema: { tags, summary: 'Read a user', params: IdParams, response: { 200: User, ...errors } } },
    async (request) => toApiUser(request.owner),
  );

  app.put(
    '/users/:id',
    {
      config: { owner: 'id' },
      schema: {
        tags,
        summary: 'Update a user (only the fields sent)',
        params: IdParams,
        body: UpdateUserBody,
        response: { 200: User, ...writeErrors },
      },
    },
    async (request) => {
      return toApiUser(await changeUser(db, request.principal, request.owner, request.body, clock()));
    },
  );

  app.post(
    '/users/:id/cancel',
    {
      config: { owner: 'id' },
      schema: {
        tags,
        summary: 'Cancel an account (Administrator, or the user themself)',
        params: IdParams,
        response: { 200: User, ...errors },
      },
    },
    async (request) => toApiUser(await cancelUser(db, request.principal, request.owner, clock())),
  );

  app.post(
    '/users/:id/sending/resume',
    {
      config: { owner: 'id' },
      schema: {
        tags,
        summary: "Resume a user's sending paused by the complaint or bounce brakes (Administrator)",
        description:
          'What the pause held goes out: scheduled messages already due, and the rest of those that were sending. The pause comes back at the next message due while the rates stay over the limits (docs/sending.md, "Brakes").',
        params: IdParams,
        response: { 200: User, ...errors },
      },
    },
    async (request) => toApiUser(await resumeUserSending({ db, queue }, request.principal, request.owner, clock())),
  );

  invitationRoute(app, { db, publicUrl: config.publicUrl, clock, tags });
};

/** `POST /v3/users/{id}/invitation`: a one-time link for a user without a password (identity/invitations.ts). */
function invitationRoute(
  app: Parameters<RoutePlugin>[0],
  { db, publicUrl, clock, tags }: { db: Db; publicUrl: string; clock: () => Date; tags: string[] },
): void {
  app.post(
    '/users/:id/invitation',
    {
      config: { owner: 'id' },
      schema: {
        tags,
        summary: 'Make a one-time link for a user without a password to set their own (who may manage the user)',
        description:
          'The link (`/invitation/{token}`) is shown only in this response; it works once and expires after 7 days. A new invitation replaces the unused ones. 409 when the user already has a password or is not active.',
        params: IdParams,
        response: { 201: Invitation, ...problems(...AUTHENTICATED_ERRORS, 409) },
      },
    },
    async (request, reply) => reply.code(201).send(await createInvitation(db, request.principal, request.owner, publicUrl, clock())),
  );
}
