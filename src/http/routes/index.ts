import type { AppContext } from '../../app-context.ts';
import type { App, RoutePlugin } from '../fastify-types.ts';
import { apiKeyRoutes } from './api-keys.ts';
import { contactImportRoutes } from './contact-import.ts';
import { contactRoutes } from './contacts.ts';
import { domainRoutes } from './domains.ts';
import { mediaRoutes } from './media.ts';
import { relayWebhookRoutes } from './relay-webhooks.ts';
import { sendgridWebhookRoutes } from './sendgrid-webhook.ts';
import { signatureRoutes } from './signatures.ts';
import { systemRoutes } from './system.ts';
import { tagRoutes } from './tags.ts';
import { teamRoutes } from './teams.ts';
import { templatedEmailRoutes } from './templated-emails.ts';
import { templatedMessageRoutes } from './templated-messages.ts';
import { trackingRoutes } from './tracking.ts';
import { userRoutes } from './users.ts';
import { voicemailDropRoutes } from './voicemail-drops.ts';
import { voicemailWebhookRoutes } from './voicemail-webhooks.ts';
import { webhookRoutes } from './webhooks.ts';

/** The JSON API under /v3: each file declares its routes with their schemas and access rules. */
const API: RoutePlugin[] = [
  teamRoutes,
  userRoutes,
  apiKeyRoutes,
  contactRoutes,
  contactImportRoutes,
  tagRoutes,
  signatureRoutes,
  templatedMessageRoutes,
  voicemailDropRoutes,
  templatedEmailRoutes,
  webhookRoutes,
  domainRoutes,
];

/**
 * Everything that is not the JSON API proper, each in a scope of its own: the health probe and
 * the API description; media (the multipart parser, and the public file URL outside /v3); the
 * tracking links inside sent emails; providers' webhooks (raw bodies, as signatures cover the
 * exact bytes). The web pages are web/'s (registered by app.ts).
 */
const OUTSIDE: { plugin: RoutePlugin; prefix?: string }[] = [
  { plugin: systemRoutes },
  { plugin: mediaRoutes },
  { plugin: trackingRoutes },
  { plugin: sendgridWebhookRoutes, prefix: '/v3' },
  { plugin: relayWebhookRoutes, prefix: '/v3' },
  { plugin: voicemailWebhookRoutes, prefix: '/v3' },
];

/** The whole HTTP surface, top to bottom. Everything under /v3 needs a key unless a route says `public`. */
export async function registerRoutes(app: App, ctx: AppContext): Promise<void> {
  for (const { plugin, prefix } of OUTSIDE) await app.register(async (scope) => plugin(scope, ctx), { prefix });
  await app.register(
    async (v3) => {
      for (const plugin of API) await v3.register(async (scope) => plugin(scope, ctx));
    },
    { prefix: '/v3' },
  );
}
