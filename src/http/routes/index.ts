import type { App, AppContext } from '../../app.ts';
import { apiKeyRoutes } from './api-keys.ts';
import { systemRoutes } from './system.ts';
import { teamRoutes } from './teams.ts';
import { userRoutes } from './users.ts';

/**
 * The whole API surface, top to bottom. Each file declares its routes with their schemas and the
 * access rule beside each handler; everything but `systemRoutes` lives under /v3 and needs a key.
 */
export async function registerRoutes(app: App, ctx: AppContext): Promise<void> {
  await app.register(async (root) => systemRoutes(root as App, ctx));
  await app.register(
    async (v3) => {
      const api = v3 as App;
      await teamRoutes(api, ctx);
      await userRoutes(api, ctx);
      await apiKeyRoutes(api, ctx);
    },
    { prefix: '/v3' },
  );
}
