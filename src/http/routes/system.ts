import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { StringEnum } from '../../json-schema.ts';
import type { App } from '../fastify-types.ts';
import { HttpError } from '../problems.ts';
import { problems } from '../schemas.ts';

/** Unauthenticated endpoints: the health probe and the API description. */
export async function systemRoutes(app: App, ctx: AppContext): Promise<void> {
  app.get(
    '/health',
    {
      config: { public: true },
      schema: {
        tags: ['System'],
        operationId: 'getHealth',
        summary: 'Liveness and database reachability',
        security: [],
        response: {
          200: Type.Object(
            { status: Type.Literal('ok'), database: StringEnum(['pglite', 'postgres'] as const, { description: 'The database in use' }) },
            { title: 'Health' },
          ),
          ...problems(503),
        },
      },
    },
    async () => {
      if (!(await ctx.database.ping())) {
        throw new HttpError('database_unavailable', 'The database does not answer.', { headers: { 'Retry-After': '5' } });
      }
      return { status: 'ok' as const, database: ctx.database.kind };
    },
  );

  app.get('/v3/openapi.json', { config: { public: true }, schema: { hide: true } }, async () => app.swagger());
}
