import { Type } from 'typebox';
import { Id } from '../json-schema.ts';
import { PROBLEMS } from './problems.ts';

/** Schemas of the HTTP layer itself: path parameters and the problem details of every error. */
export const IdParams = Type.Object({ id: Id }, { additionalProperties: false });
export const UserIdParams = Type.Object({ user_id: Id }, { additionalProperties: false });

const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    message: Type.String(),
    errors: Type.Optional(Type.Record(Type.String(), Type.Array(Type.String()))),
  },
  { $id: 'Problem', description: 'RFC 9457 problem details with Laravel-compatible members' },
);

/** What a provider's or a relay's webhook post did: the answer of every receiver under /v3/webhooks. */
export const EventReceipt = Type.Object(
  {
    recorded: Type.Integer({ minimum: 0, description: 'New events (delivery events, voicemail outcomes), now counted' }),
    duplicates: Type.Integer({ minimum: 0, description: 'Events already recorded (senders post again)' }),
    ignored: Type.Integer({
      minimum: 0,
      description: 'Events of unused kinds, malformed ones, or ones for deliveries or drops Hopper does not know',
    }),
  },
  { title: 'EventReceipt' },
);

/** The error responses a route can give, for the OpenAPI document and the serializer. */
export function problems(...statuses: number[]): Record<number, typeof Problem> {
  const known = new Set<number>(Object.values(PROBLEMS).map((p) => p.status));
  return Object.fromEntries(statuses.filter((s) => known.has(s)).map((s) => [s, Problem]));
}

/** Errors every authenticated route may answer with. */
export const AUTHENTICATED_ERRORS = [400, 401, 403, 404] as const;
