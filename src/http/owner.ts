import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../db/database.ts';
import { requireReachableUser } from '../identity/access.ts';
import { findUser } from '../identity/users.ts';
import { type Done, doneWhen } from './hook-done.ts';

/**
 * The access rule for routes that act for a user (`/users/:user_id/…`, `/users/:id`): a route
 * declares `config: { owner: 'user_id' }` and this hook, run before its handler, loads that user
 * and checks that the caller may reach them. The handler then finds the user in `request.owner`.
 */
export function ownerHook(db: Db) {
  return (request: FastifyRequest, _reply: FastifyReply, done: Done): void => {
    const param = request.routeOptions.config.owner;
    if (!param) {
      done();
      return;
    }
    const id = (request.params as Record<string, number>)[param] as number;
    // A user acting on their own collections (`/users/{own id}/…`) is the row authentication read
    // (as fresh as the principal itself), at once; `/users/{id}` reads it anew, for its writes.
    const { user } = request.principal;
    if (param === 'user_id' && user?.id === id) {
      request.owner = requireReachableUser(request.principal, user, id);
      done();
      return;
    }
    doneWhen(
      findUser(db, id).then((found) => {
        request.owner = requireReachableUser(request.principal, found, id);
      }),
      done,
    );
  };
}
