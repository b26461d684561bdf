import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { Config } from '../config.ts';
import type { App } from './context.ts';

/**
 * The OpenAPI 3.1 document is generated from the route schemas (never written by hand) and served
 * at /v3/openapi.json; /docs renders it with Swagger UI, whose assets ship in the package.
 */
export async function registerOpenApi(app: App, config: Config): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Hopper messaging API',
        version: '3',
        description:
          'Voicemail drops and templated emails sent to contacts now or later, with delivery counters. ' +
          'Every request carries Authorization: Bearer <API key>. Errors are RFC 9457 problem details.',
      },
      servers: [{ url: config.publicUrl }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'A Hopper API key (hop_…)' } } },
      security: [{ bearer: [] }],
    },
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { docExpansion: 'list', deepLinking: true },
    staticCSP: true,
    logLevel: 'warn',
  });
}
