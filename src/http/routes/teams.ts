import { Type } from 'typebox';
import type { App, AppContext } from '../../app.ts';
import type { TeamRow } from '../../db/schema.ts';
import { requireRank } from '../../identity/access.ts';
import { RANK } from '../../identity/roles.ts';
import { formatTimestamp } from '../../time.ts';
import { HttpError } from '../problems.ts';
import { AUTHENTICATED_ERRORS, Id, IdParams, problems, Timestamp, WritableBody } from '../schemas.ts';
import { envelopeSchema, type Filters, searchPage, searchQuery } from '../search.ts';

const Team = Type.Object({ id: Id, name: Type.String(), created_at: Timestamp, updated_at: Timestamp });
const TeamBody = WritableBody({ name: Type.String({ minLength: 1, maxLength: 255 }) }, ['id', 'created_at', 'updated_at']);
const FILTERS: Filters = { id: { kind: 'id', column: 'id' }, name: { kind: 'text', column: 'name' } };

function toApiTeam(row: TeamRow) {
  return { id: row.id, name: row.name, created_at: formatTimestamp(row.created_at), updated_at: formatTimestamp(row.updated_at) };
}

/** Teams: Administrators create and see all; everyone else sees their own team. */
export async function teamRoutes(app: App, { database: { db }, config }: AppContext): Promise<void> {
  const tags = ['Teams'];

  app.post(
    '/teams',
    {
      schema: {
        tags,
        summary: 'Create a team (Administrator)',
        body: TeamBody,
        response: { 201: Team, ...problems(...AUTHENTICATED_ERRORS) },
      },
    },
    async (request, reply) => {
      requireRank(request.principal, RANK.Administrator, 'create teams');
      const row = await db.insertInto('teams').values({ name: request.body.name }).returningAll().executeTakeFirstOrThrow();
      return reply.code(201).header('Location', `${config.publicUrl}/v3/teams/${row.id}`).send(toApiTeam(row));
    },
  );

  app.get(
    '/teams',
    {
      schema: {
        tags,
        summary: 'Search teams',
        querystring: searchQuery(FILTERS),
        response: { 200: envelopeSchema(Team), ...problems(...AUTHENTICATED_ERRORS) },
      },
    },
    async (request) => {
      const { principal } = request;
      let query = db.selectFrom('teams').selectAll();
      if (principal.rank < RANK.Administrator) query = query.where('id', '=', principal.teamId ?? 0);
      return searchPage(query, FILTERS, request.query, request, config.publicUrl, 'id', toApiTeam);
    },
  );

  app.get(
    '/teams/:id',
    { schema: { tags, summary: 'Read a team', params: IdParams, response: { 200: Team, ...problems(...AUTHENTICATED_ERRORS) } } },
    async (request) => {
      const { id } = request.params;
      const row = await db.selectFrom('teams').selectAll().where('id', '=', id).executeTakeFirst();
      if (!row) throw new HttpError('not_found', `Team ${id} does not exist.`);
      if (request.principal.rank < RANK.Administrator && request.principal.teamId !== id) {
        throw new HttpError('forbidden', `You may not access team ${id}.`);
      }
      return toApiTeam(row);
    },
  );
}
