import type { AppContext } from '../../context.ts';
import { webPages } from '../../web/index.ts';
import type { App } from '../context.ts';
import { apiKeyRoutes } from './api-keys.ts';
import { contactRoutes } from './contacts.ts';
import { mediaRoutes } from './media.ts';
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

/**
 * The whole API surface, top to bottom. Each file declares its routes with their schemas and the
 * access rule beside each handler; everything but `systemRoutes` lives under /v3 and needs a key.
 */
export async function registerRoutes(app: App, ctx: AppContext): Promise<void> {
  await app.register(async (root) => systemRoutes(root as App, ctx));
  await app.register(async (web) => webPages(web as App, ctx));
  // A scope of its own: the multipart parser, and the public file URL outside /v3.
  await app.register(async (media) => mediaRoutes(media as App, ctx));
  // A scope of its own: the one-click unsubscribe form parser; the links inside sent emails.
  await app.register(async (tracking) => trackingRoutes(tracking as App, ctx));
  // A scope of its own: provider webhooks read their bodies raw (signatures cover the exact bytes).
  await app.register(async (webhooks) => sendgridWebhookRoutes(webhooks as App, ctx), { prefix: '/v3' });
  // A scope of its own: the voicemail providers' form and raw-JSON callbacks.
  await app.register(async (webhooks) => voicemailWebhookRoutes(webhooks as App, ctx), { prefix: '/v3' });
  await app.register(
    async (v3) => {
      const api = v3 as App;
      await teamRoutes(api, ctx);
      await userRoutes(api, ctx);
      await apiKeyRoutes(api, ctx);
      await contactRoutes(api, ctx);
      await tagRoutes(api, ctx);
      await signatureRoutes(api, ctx);
      await templatedMessageRoutes(api, ctx);
      await voicemailDropRoutes(api, ctx);
      await templatedEmailRoutes(api, ctx);
    },
    { prefix: '/v3' },
  );
}
