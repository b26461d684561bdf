import { createTeam, findVisibleTeam, searchTeams, TEAM_FILTERS, Team, TeamBody, toApiTeam } from '../../identity/teams.ts';
import { created } from '../created.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems } from '../schemas.ts';

/** Teams: Administrators create and see all; everyone else sees their own team. */
export const teamRoutes: RoutePlugin = async (app, { database: { db }, config, clock }) => {
  const tags = ['Teams'];
  const errors = problems(...AUTHENTICATED_ERRORS);

  app.post(
    '/teams',
    { schema: { tags, summary: 'Create a team (Administrator)', body: TeamBody, response: { 201: Team, ...errors } } },
    async (request, reply) => {
      const row = await createTeam(db, request.principal, request.body.name, clock());
      return created(reply, `${config.publicUrl}/v3/teams/${row.id}`, toApiTeam(row));
    },
  );

  app.get(
    '/teams',
    {
      schema: { tags, summary: 'Search teams', querystring: searchQuery(TEAM_FILTERS), response: { 200: envelopeSchema(Team), ...errors } },
    },
    async (request) => envelope(await searchTeams(db, request.principal, request.query), toApiTeam, request, config.publicUrl),
  );

  app.get(
    '/teams/:id',
    { schema: { tags, summary: 'Read a team', params: IdParams, response: { 200: Team, ...errors } } },
    async (request) => toApiTeam(await findVisibleTeam(db, request.principal, request.params.id)),
  );
};
