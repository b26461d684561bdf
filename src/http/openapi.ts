import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import swagger from '@fastify/swagger';
import type { Config } from '../config.ts';
import type { App } from './fastify-types.ts';
import './openapi-names.ts';
import { API_INTRODUCTION, finishDocument, type RouteInfo, routeSchema } from './openapi-document.ts';

/**
 * The OpenAPI 3.1 document is generated from the route schemas (never written by hand) and served
 * at /v3/openapi.json; openapi-document.ts derives what every route shares (ids, errors, headers,
 * named components, code samples). /docs renders it with Redoc, whose standalone bundle is served
 * from node_modules (no CDN): the page has no inline script (Redoc starts from its `<redoc>`
 * element), so its CSP allows scripts from this origin only.
 */
export async function registerOpenApi(app: App, config: Config): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Hopper messaging API',
        version: '3',
        description: API_INTRODUCTION,
        license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
        contact: { name: 'The operator of this Hopper server', url: `${config.publicUrl}/` },
      },
      servers: [{ url: config.publicUrl, description: 'This Hopper server' }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'A Hopper API key (hop_…)' } } },
      security: [{ bearer: [] }],
    },
    transform: ({ schema, url, route }) => ({ schema: routeSchema(schema as never, route as RouteInfo) as never, url }),
    transformObject: (documentObject) =>
      finishDocument((documentObject as { openapiObject: object }).openapiObject, {
        generatedCertificate: generatedCertificate(config),
      }) as never,
  });
  registerReferencePage(app);
}

/**
 * The certificate Hopper made for itself (src/tls.ts), when it serves HTTPS with it: the reference
 * page's curl samples trust it by its absolute path. Behind a proxy or with the operator's own
 * certificate, no sample names a file.
 */
function generatedCertificate(config: Config): string | undefined {
  if (config.trustProxy || config.tlsCertFile || !config.publicUrl.startsWith('https:')) return undefined;
  return join(config.dataDir, 'tls', 'cert.pem');
}

/**
 * The bundle as Redoc ships it, but for the one thing it loads from elsewhere: the Redocly logo in
 * the menu's footer (from Redocly's CDN), replaced by an empty image; the link stays. Read on the
 * first request for it and kept as bytes: a process nobody reads the reference on never holds its
 * megabyte (docs/performance.md, "Memory").
 */
let redoc: Promise<Buffer> | undefined;
function redocBundle(): Promise<Buffer> {
  redoc ??= readFile(createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js'), 'utf8').then((text) =>
    Buffer.from(
      text.replaceAll(
        'https://cdn.redoc.ly/redoc/logo-mini.svg',
        "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/%3E",
      ),
    ),
  );
  return redoc;
}

/**
 * Scripts from this origin only (no inline script, no eval); Redoc's styled-components write
 * `<style>` elements, hence 'unsafe-inline' for styles alone; its search index runs in a worker
 * made from a blob.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  'worker-src blob:',
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Hopper API reference</title>
</head>
<body>
<redoc spec-url="/v3/openapi.json" expand-responses="200,201" required-props-first="true" sort-required-props-first="true" hide-download-button="false" path-in-middle-panel="true"></redoc>
<script src="/docs/redoc.standalone.js"></script>
</body>
</html>
`;

function registerReferencePage(app: App): void {
  const page = async (_request: unknown, reply: import('fastify').FastifyReply) =>
    reply.type('text/html; charset=utf-8').header('Content-Security-Policy', DOCS_CSP).header('Cache-Control', 'no-cache').send(PAGE);
  app.get('/docs', { schema: { hide: true } }, page);
  app.get('/docs/', { schema: { hide: true } }, page);
  app.get('/docs/redoc.standalone.js', { schema: { hide: true } }, async (_request, reply) =>
    reply
      .type('text/javascript; charset=utf-8')
      .header('Cache-Control', 'public, max-age=3600')
      .send(await redocBundle()),
  );
}
