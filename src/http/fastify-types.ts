import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyBaseLogger, FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from 'fastify';
import type { AppContext } from '../app-context.ts';
import type { UserRow } from '../db/schema.ts';
import type { Principal } from '../identity/access.ts';

/** The Fastify instance with TypeBox types, as every route plugin receives it. */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/** A route plugin: registered with `app.register(plugin, ctx)`, so its routes live in a scope of their own. */
export type RoutePlugin = (app: App, ctx: AppContext) => Promise<void>;

declare module 'fastify' {
  interface FastifySchema {
    /**
     * A request body the document declares but Fastify does not check: bodies read raw (signed
     * callbacks, whose signature covers the bytes) or not read at all (one-click forms). The
     * OpenAPI step (openapi-document.ts, `routeSchema`) turns it into the operation's requestBody.
     */
    documentedBody?: { content: Record<string, { schema: unknown }>; description?: string };
  }
  interface FastifyContextConfig {
    /** Reachable without an API key. */
    public?: boolean;
    /**
     * The path parameter naming the user a route acts for (`/users/:user_id/…`). The owner is
     * loaded and checked against the access rule before the handler runs (http/owner.ts), and
     * handed to it as `request.owner`.
     */
    owner?: 'user_id' | 'id';
  }
  interface FastifyRequest {
    principal: Principal;
    /** The user named by the route's `owner` parameter, reachable by the caller. */
    owner: UserRow;
  }
}
