import { sql } from 'kysely';
import { Type } from 'typebox';
import type { App, AppContext } from '../../app.ts';
import type { Db } from '../../db/database.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { UserUpdate } from '../../db/schema.ts';
import { type Principal, requireRank, requireReachableUser } from '../../identity/access.ts';
import { hashPassword, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../../identity/passwords.ts';
import { RANK, ROLE_NAMES, rankOf } from '../../identity/roles.ts';
import { emailTaken, findUser, insertUser, toApiUser, updateUser } from '../../identity/users.ts';
import { isTimeZone } from '../../time.ts';
import { endUserSessions } from '../../web/sessions.ts';
import { type FieldErrors, HttpError, validationError } from '../problems.ts';
import { AUTHENTICATED_ERRORS, Id, IdParams, Nullable, problems, StringEnum, Timestamp, WritableBody } from '../schemas.ts';
import { envelopeSchema, type Filters, searchPage, searchQuery } from '../search.ts';

const User = Type.Object({
  id: Id,
  first_name: Type.String(),
  last_name: Type.String(),
  full_name: Type.String(),
  email: Type.String(),
  phone: Nullable(Type.String()),
  time_zone: Nullable(Type.String()),
  status: StringEnum(['Active', 'Cancelled'] as const),
  roles: Type.Array(StringEnum(ROLE_NAMES)),
  team_id: Nullable(Type.Integer()),
  cancelled_at: Nullable(Timestamp),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
});

const fields = {
  first_name: Type.String({ minLength: 1, maxLength: 255 }),
  last_name: Type.String({ maxLength: 255 }),
  email: Type.String({ format: 'email', maxLength: 254 }),
  phone: Nullable(Type.String({ maxLength: 32, pattern: '^\\+?[0-9 ().-]{7,32}$' })),
  time_zone: Nullable(Type.String({ maxLength: 64, description: 'IANA time zone, e.g. America/New_York' })),
  roles: Type.Array(StringEnum(ROLE_NAMES), { minItems: 1, maxItems: ROLE_NAMES.length, uniqueItems: true }),
  team_id: Nullable(Id),
  password: Type.String({
    minLength: PASSWORD_MIN_LENGTH,
    maxLength: PASSWORD_MAX_LENGTH,
    writeOnly: true,
    description: 'Password for signing in to the web pages (/login); stored as a scrypt hash, never returned',
  }),
};
const READ_ONLY = ['id', 'full_name', 'status', 'cancelled_at', 'created_at', 'updated_at', 'deleted_at'] as const;
const { first_name, last_name, email, ...optional } = fields;
const CreateUserBody = WritableBody(
  {
    first_name,
    last_name,
    email,
    phone: Type.Optional(optional.phone),
    time_zone: Type.Optional(optional.time_zone),
    roles: Type.Optional(optional.roles),
    team_id: Type.Optional(optional.team_id),
    password: Type.Optional(optional.password),
  },
  READ_ONLY,
);
const UpdateUserBody = WritableBody(
  Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, Type.Optional(v)])) as {
    [K in keyof typeof fields]: ReturnType<typeof Type.Optional<(typeof fields)[K]>>;
  },
  READ_ONLY,
);

const FILTERS: Filters = {
  id: { kind: 'id', column: 'id' },
  team_id: { kind: 'id', column: 'team_id' },
  first_name: { kind: 'text', column: 'first_name' },
  last_name: { kind: 'text', column: 'last_name' },
  email: { kind: 'text', column: 'email' },
  status: { kind: 'enum', column: 'status', values: ['Active', 'Cancelled'] },
};

type Changes = { email?: string; time_zone?: string | null; team_id?: number | null };

/** Checks that need the database or the runtime, reported together like schema errors. */
async function checkReferences(db: Db, changes: Changes, exceptId?: number): Promise<void> {
  const errors: FieldErrors = {};
  if (changes.time_zone && !isTimeZone(changes.time_zone)) {
    errors.time_zone = ['must be an IANA time zone such as America/New_York'];
  }
  if (changes.team_id) {
    const team = await db.selectFrom('teams').select('id').where('id', '=', changes.team_id).executeTakeFirst();
    if (!team) errors.team_id = ['does not name an existing team'];
  }
  if (changes.email !== undefined && (await emailTaken(db, changes.email, exceptId))) {
    errors.email = ['is already taken'];
  }
  if (Object.keys(errors).length > 0) throw validationError(errors);
}

function requireGrantable(principal: Principal, roles: readonly string[]): void {
  requireRank(principal, RANK['Team Administrator'], 'grant roles');
  if (rankOf(roles) > principal.rank) throw new HttpError('forbidden', 'You may not grant a role higher than your own.');
}

/** Two requests racing for one address: the unique index decides, and the loser gets the same 400. */
async function uniqueEmail<T>(write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (error) {
    if (isUniqueViolation(error)) throw validationError({ email: ['is already taken'] });
    throw error;
  }
}

export async function userRoutes(app: App, { database: { db }, config, clock }: AppContext): Promise<void> {
  const tags = ['Users'];
  const errors = problems(...AUTHENTICATED_ERRORS);

  app.get(
    '/users',
    {
      schema: {
        tags,
        summary: 'Search the users you may reach',
        querystring: searchQuery(FILTERS),
        response: { 200: envelopeSchema(User), ...errors },
      },
    },
    async (request) => {
      const { principal } = request;
      let query = db.selectFrom('users').selectAll().where('deleted_at', 'is', null);
      if (principal.rank < RANK['Team Administrator'] || principal.teamId === null) {
        if (principal.rank < RANK.Administrator) query = query.where('id', '=', principal.userId);
      } else if (principal.rank < RANK.Administrator) {
        query = query.where((eb) =>
          eb.or([
            eb('id', '=', principal.userId),
            eb.and([eb('team_id', '=', principal.teamId), sql<boolean>`NOT ('Administrator' = ANY (roles))`]),
          ]),
        );
      }
      return searchPage(query, FILTERS, request.query, request, config.publicUrl, 'id', toApiUser);
    },
  );

  app.post(
    '/users',
    {
      schema: {
        tags,
        summary: 'Create a user (Administrator, or Team Administrator for their team)',
        body: CreateUserBody,
        response: { 201: User, ...errors },
      },
    },
    async (request, reply) => {
      const { principal, body } = request;
      const roles = body.roles ?? ['User'];
      requireGrantable(principal, roles);
      const teamId = body.team_id === undefined ? (principal.rank < RANK.Administrator ? principal.teamId : null) : body.team_id;
      if (principal.rank < RANK.Administrator && (teamId === null || teamId !== principal.teamId)) {
        throw new HttpError('forbidden', 'A Team Administrator creates users in their own team only.');
      }
      await checkReferences(db, { email: body.email, time_zone: body.time_zone, team_id: teamId });
      const row = await uniqueEmail(
        insertUser(db, {
          first_name: body.first_name,
          last_name: body.last_name,
          email: body.email,
          phone: body.phone ?? null,
          time_zone: body.time_zone ?? null,
          roles,
          team_id: teamId,
          password_hash: body.password === undefined ? null : await hashPassword(body.password),
        }),
      );
      return reply.code(201).header('Location', `${config.publicUrl}/v3/users/${row.id}`).send(toApiUser(row));
    },
  );

  app.get(
    '/users/:id',
    { schema: { tags, summary: 'Read a user', params: IdParams, response: { 200: User, ...errors } } },
    async (request) => toApiUser(requireReachableUser(request.principal, await findUser(db, request.params.id), request.params.id)),
  );

  app.put(
    '/users/:id',
    {
      schema: {
        tags,
        summary: 'Update a user (only the fields sent)',
        params: IdParams,
        body: UpdateUserBody,
        response: { 200: User, ...errors },
      },
    },
    async (request) => {
      const { principal, body } = request;
      const target = requireReachableUser(principal, await findUser(db, request.params.id), request.params.id);
      if (body.roles !== undefined && !sameMembers(body.roles, target.roles)) requireGrantable(principal, body.roles);
      if (body.team_id !== undefined && body.team_id !== target.team_id) {
        requireRank(principal, RANK.Administrator, 'move users between teams');
      }
      await checkReferences(db, body, target.id);
      const changes: UserUpdate = {};
      for (const key of ['first_name', 'last_name', 'email', 'phone', 'time_zone', 'roles', 'team_id'] as const) {
        if (body[key] !== undefined) (changes as Record<string, unknown>)[key] = body[key];
      }
      if (body.password !== undefined) changes.password_hash = await hashPassword(body.password);
      const updated = await uniqueEmail(updateUser(db, target.id, changes));
      // A new password signs the user out of every browser, in case the old one was known to someone else.
      if (body.password !== undefined) await endUserSessions(db, target.id);
      return toApiUser(updated);
    },
  );

  app.post(
    '/users/:id/cancel',
    {
      schema: {
        tags,
        summary: 'Cancel an account (Administrator, or the user themself)',
        params: IdParams,
        response: { 200: User, ...errors },
      },
    },
    async (request) => {
      const { principal } = request;
      const target = requireReachableUser(principal, await findUser(db, request.params.id), request.params.id);
      if (principal.rank < RANK.Administrator && target.id !== principal.userId) {
        throw new HttpError('forbidden', 'Only an Administrator or the user themself may cancel an account.');
      }
      if (target.status === 'Cancelled') return toApiUser(target);
      return toApiUser(await updateUser(db, target.id, { status: 'Cancelled', cancelled_at: clock() }));
    },
  );
}

function sameMembers(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}
