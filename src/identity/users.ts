import { sql } from 'kysely';
import { type Static, Type } from 'typebox';
import type { Db } from '../db/database.ts';
import { uniqueOn } from '../db/errors.ts';
import type { UserRef } from '../db/owned-rows.ts';
import type { NewUser, UserRow, UserUpdate } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { DomainError, duplicate, type FieldErrors, throwIfAny } from '../errors.ts';
import { Id, Nullable, StringEnum, Timestamp, WritableBody } from '../json-schema.ts';
import { formatTimestamp, isTimeZone } from '../time.ts';
import { manageableUsers, type Principal, reachableUsers, requireManageable, requireRank } from './access.ts';
import { hashPassword, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH, verifyPassword } from './passwords.ts';
import { RANK, ROLE_NAMES, type RoleName, rankOf } from './roles.ts';
import { teamExists } from './teams.ts';
import { endUserSessions } from './web-sessions.ts';

/**
 * Users (README, "API conventions": roles; docs/decisions.md, "Identity and access"): their API shape and bodies, who may create and change whom, and their
 * statements. Who may reach a user at all is the one access rule (access.ts).
 */

/** Why the brakes paused a user's sending (sending/brakes.ts). */
const SENDING_PAUSE_REASONS = ['complaint_rate', 'hard_bounce_rate'] as const;
type SendingPauseReason = (typeof SENDING_PAUSE_REASONS)[number];

export const User = Type.Object({
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
  sender_name: Type.String({ description: 'The name emails are sent as (default: full_name)' }),
  sender_email: Type.String({ description: 'The address emails are sent as or with as Reply-To (default: email)' }),
  postal_address: Nullable(Type.String({ description: 'Shown in every email footer (CAN-SPAM)' })),
  sending_paused: Nullable(
    Type.Object(
      {
        reason: StringEnum(SENDING_PAUSE_REASONS, { description: 'Which brake paused sending: spam reports, or hard bounces' }),
        since: Timestamp,
        complaint_rate: Type.Number({
          description: 'Spam reports per email delivered over the last 30 days, as a fraction (0.0067 is 0.67 %)',
        }),
        hard_bounce_rate: Type.Number({ description: 'Hard bounces per email sent over the last 30 days, as a fraction' }),
      },
      {
        title: 'SendingPause',
        description:
          'Why this user\'s emails and drops are held (docs/sending.md, "Brakes"): scheduled ones stay Scheduled until an Administrator resumes; null while sending',
      },
    ),
  ),
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
  sender_name: Nullable(Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\r\\n]*$', description: 'null: the full name' })),
  sender_email: Nullable(Type.String({ format: 'email', maxLength: 254, description: 'null: the account email' })),
  postal_address: Nullable(Type.String({ minLength: 1, maxLength: 1000, description: 'Multi-line postal address' })),
  password: Type.String({
    minLength: PASSWORD_MIN_LENGTH,
    maxLength: PASSWORD_MAX_LENGTH,
    writeOnly: true,
    description: 'Password for signing in to the web pages (/login); stored as a scrypt hash, never returned',
  }),
};
const READ_ONLY = ['id', 'full_name', 'status', 'sending_paused', 'cancelled_at', 'created_at', 'updated_at', 'deleted_at'] as const;
const { first_name, last_name, email, ...optional } = fields;
export const CreateUserBody = WritableBody(
  {
    first_name,
    last_name,
    email,
    phone: Type.Optional(optional.phone),
    time_zone: Type.Optional(optional.time_zone),
    roles: Type.Optional(optional.roles),
    team_id: Type.Optional(optional.team_id),
    sender_name: Type.Optional(optional.sender_name),
    sender_email: Type.Optional(optional.sender_email),
    postal_address: Type.Optional(optional.postal_address),
    password: Type.Optional(optional.password),
  },
  READ_ONLY,
);
export const UpdateUserBody = WritableBody(
  Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, Type.Optional(v)])) as {
    [K in keyof typeof fields]: ReturnType<typeof Type.Optional<(typeof fields)[K]>>;
  },
  READ_ONLY,
);

export const USER_FILTERS: Filters = {
  id: { kind: 'id', column: 'id' },
  team_id: { kind: 'id', column: 'team_id' },
  first_name: { kind: 'text', column: 'first_name' },
  last_name: { kind: 'text', column: 'last_name' },
  email: { kind: 'text', column: 'email' },
  status: { kind: 'enum', column: 'status', values: ['Active', 'Cancelled'] },
};

export function fullName(user: Pick<UserRow, 'first_name' | 'last_name'>): string {
  return `${user.first_name} ${user.last_name}`.trim();
}

/** The name a user's emails are sent as. */
export function senderName(user: Pick<UserRow, 'first_name' | 'last_name' | 'sender_name'>): string {
  return user.sender_name ?? fullName(user);
}

/** The API shape of a user: the one place rows become JSON. */
export function toApiUser(row: UserRow) {
  return {
    id: row.id,
    first_name: row.first_name,
    last_name: row.last_name,
    full_name: fullName(row),
    email: row.email,
    phone: row.phone,
    time_zone: row.time_zone,
    status: row.status,
    roles: row.roles,
    team_id: row.team_id,
    sender_name: senderName(row),
    sender_email: row.sender_email ?? row.email,
    postal_address: row.postal_address,
    sending_paused: row.sending_paused_at
      ? {
          reason: (row.sending_paused_reason ?? 'complaint_rate') as SendingPauseReason,
          since: formatTimestamp(row.sending_paused_at),
          complaint_rate: row.sending_paused_complaint_rate ?? 0,
          hard_bounce_rate: row.sending_paused_hard_bounce_rate ?? 0,
        }
      : null,
    cancelled_at: formatTimestamp(row.cancelled_at),
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatTimestamp(row.deleted_at),
  };
}

// ── Rules ───────────────────────────────────────────────────────────────────────────────────

type References = { email?: string; time_zone?: string | null; team_id?: number | null };

/** Checks that need the database or the runtime, reported together like schema errors. */
async function checkReferences(db: Db, changes: References, exceptId?: number): Promise<void> {
  const errors: FieldErrors = {};
  if (changes.time_zone !== undefined && changes.time_zone !== null && !isTimeZone(changes.time_zone)) {
    errors.time_zone = ['must be an IANA time zone such as America/New_York'];
  }
  if (changes.team_id) {
    if (!(await teamExists(db, changes.team_id))) errors.team_id = ['does not name an existing team'];
  }
  throwIfAny(errors);
  if (changes.email !== undefined && (await emailTaken(db, changes.email, exceptId))) throw emailHeld(changes.email);
}

/** Another live user has this address (in any case). */
function emailHeld(email: string): DomainError {
  return duplicate('email', `Another user already has the email address ${email}.`, 'is already the email address of another user');
}

/** Roles are granted by a Team Administrator or higher, never above the granter's own rank. */
function requireGrantable(principal: Principal, roles: readonly string[]): void {
  requireRank(principal, RANK['Team Administrator'], 'grant roles');
  if (rankOf(roles) > principal.rank) throw new DomainError('forbidden', 'You may not grant a role higher than your own.');
}

function sameMembers(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

// ── Statements ──────────────────────────────────────────────────────────────────────────────

export async function findUser(db: Db, id: number): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', id).where('deleted_at', 'is', null).executeTakeFirst();
}

/** The live user signing in with this email (in any case), with what the sign-in checks. */
export async function findSignInUser(db: Db, email: string) {
  return db
    .selectFrom('users')
    .select(['id', 'password_hash', 'status', 'cancelled_at'])
    .where(sql<string>`lower(email)`, '=', email.toLowerCase())
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

/** The users `principal` may reach (or, with `manage`, manage), filtered by `USER_FILTERS`. */
export function searchUsers(db: Db, principal: Principal, params: SearchParams, strength: 'read' | 'manage' = 'read') {
  const rule = strength === 'manage' ? manageableUsers(principal) : reachableUsers(principal);
  const query = db.selectFrom('users').selectAll().where('deleted_at', 'is', null).where(rule);
  return runSearch(query, USER_FILTERS, params, 'id');
}

export async function insertUser(db: Db, user: NewUser): Promise<UserRow> {
  return uniqueOn(() => emailHeld(user.email), db.insertInto('users').values(user).returningAll().executeTakeFirstOrThrow());
}

/** A user made through the API: an Administrator makes anyone, a Team Administrator users of their own team. */
export async function createUser(db: Db, principal: Principal, body: Static<typeof CreateUserBody>, now: Date): Promise<UserRow> {
  const roles = body.roles ?? ['User'];
  requireGrantable(principal, roles);
  const teamId = body.team_id === undefined ? (principal.rank < RANK.Administrator ? principal.teamId : null) : body.team_id;
  if (principal.rank < RANK.Administrator && (teamId === null || teamId !== principal.teamId)) {
    throw new DomainError('forbidden', 'A Team Administrator creates users in their own team only.');
  }
  await checkReferences(db, { email: body.email, time_zone: body.time_zone, team_id: teamId });
  return insertUser(db, {
    first_name: body.first_name,
    last_name: body.last_name,
    email: body.email,
    phone: body.phone ?? null,
    time_zone: body.time_zone ?? null,
    roles,
    team_id: teamId,
    sender_name: body.sender_name ?? null,
    sender_email: body.sender_email ?? null,
    postal_address: body.postal_address?.trim() || null,
    password_hash: body.password === undefined ? null : await hashPassword(body.password),
    created_at: now,
    updated_at: now,
  });
}

/**
 * Applies the fields present; roles and teams change only as `principal`'s rank allows. A new
 * password ends the user's web sessions.
 */
export async function changeUser(
  db: Db,
  principal: Principal,
  target: UserRow,
  body: Static<typeof UpdateUserBody>,
  now: Date,
): Promise<UserRow> {
  if (target.id !== principal.userId) {
    requireManageable(principal, target, 'change the account');
    // A password or an email address is how one signs in as a user: set by them or an Administrator only.
    if ((body.password !== undefined || body.email !== undefined) && principal.rank < RANK.Administrator) {
      throw new DomainError('forbidden', 'Only the user themself or an Administrator may set a password or an email address.');
    }
  }
  const demoting = body.roles !== undefined && target.roles.includes('Administrator') && !body.roles.includes('Administrator');
  if (body.roles !== undefined && !sameMembers(body.roles, target.roles)) requireGrantable(principal, body.roles);
  if (body.team_id !== undefined && body.team_id !== target.team_id) {
    requireRank(principal, RANK.Administrator, 'move users between teams');
  }
  await checkReferences(db, body, target.id);
  const changes: UserUpdate = {};
  for (const key of [
    'first_name',
    'last_name',
    'email',
    'phone',
    'time_zone',
    'roles',
    'team_id',
    'sender_name',
    'sender_email',
  ] as const) {
    if (body[key] !== undefined) (changes as Record<string, unknown>)[key] = body[key];
  }
  if (body.postal_address !== undefined) changes.postal_address = body.postal_address?.trim() || null;
  if (body.password !== undefined) changes.password_hash = await hashPassword(body.password);
  const updated =
    demoting && isActiveAdministrator(target)
      ? await keepingAnAdministrator(db, target, 'demoted', (trx) => updateUser(trx, target.id, changes, now))
      : await updateUser(db, target.id, changes, now);
  // A new password signs the user out of every browser, in case the old one was known to someone else.
  if (body.password !== undefined) await endUserSessions(db, target.id);
  return updated;
}

const SIMPLE_EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * The sender identity from the account settings form: empty fields go back to their defaults
 * (full name, account email, no postal address). The same limits as the API's schema.
 */
export async function changeSender(
  db: Db,
  userId: number,
  form: { sender_name: string; sender_email: string; postal_address: string },
  now: Date,
): Promise<UserRow> {
  const errors: FieldErrors = {};
  if (form.sender_name.length > 255 || /[\r\n]/.test(form.sender_name)) errors.sender_name = ['must be one line of at most 255 characters'];
  if (form.sender_email && (form.sender_email.length > 254 || !SIMPLE_EMAIL.test(form.sender_email))) {
    errors.sender_email = ['must be an email address'];
  }
  if (form.postal_address.length > 1000) errors.postal_address = ['must be at most 1000 characters'];
  throwIfAny(errors);
  return updateUser(
    db,
    userId,
    { sender_name: form.sender_name || null, sender_email: form.sender_email || null, postal_address: form.postal_address || null },
    now,
  );
}

/** Cancels an account (Administrator, or the user themself); cancelling again keeps the first `cancelled_at`. */
export async function cancelUser(db: Db, principal: Principal, target: UserRow, now: Date): Promise<UserRow> {
  if (principal.rank < RANK.Administrator && target.id !== principal.userId) {
    throw new DomainError('forbidden', 'Only an Administrator or the user themself may cancel an account.');
  }
  if (target.status === 'Cancelled') return target;
  const cancel = (trx: Db) => updateUser(trx, target.id, { status: 'Cancelled', cancelled_at: now }, now);
  return isActiveAdministrator(target) ? keepingAnAdministrator(db, target, 'cancelled', cancel) : cancel(db);
}

/**
 * Runs `change` — which demotes or cancels an Administrator, or revokes one's key — and keeps it
 * only if an Administrator who can act remains afterwards: active, and holding a password or a
 * live API key (one with neither cannot administer anything). Under a lock, so two Administrators
 * demoting each other at once cannot both succeed.
 */
export async function keepingAnAdministrator<T>(db: Db, target: UserRef, what: string, change: (trx: Db) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext('hopper:administrators'))`.execute(trx);
    const result = await change(trx);
    const able = await trx
      .selectFrom('users as u')
      .select('u.id')
      .where(sql<boolean>`'Administrator' = ANY (u.roles)`)
      .where('u.status', '=', 'Active')
      .where('u.deleted_at', 'is', null)
      .where((eb) =>
        eb.or([
          eb('u.password_hash', 'is not', null),
          eb.exists(eb.selectFrom('api_keys as k').select('k.id').whereRef('k.user_id', '=', 'u.id').where('k.revoked_at', 'is', null)),
        ]),
      )
      .limit(1)
      .executeTakeFirst();
    if (!able) {
      throw new DomainError(
        'bad_request',
        `User ${target.id} is the last active Administrator who can sign in or hold a key, and cannot be ${what}: make another user an Administrator (with a password or a key) first.`,
      );
    }
    return result;
  });
}

/** Whether `user` is an active Administrator (whose loss `keepingAnAdministrator` guards). */
function isActiveAdministrator(user: Pick<UserRow, 'roles' | 'status' | 'deleted_at'>): boolean {
  return user.roles.includes('Administrator') && user.status === 'Active' && user.deleted_at === null;
}

async function updateUser(db: Db, id: number, changes: UserUpdate, now: Date): Promise<UserRow> {
  return uniqueOn(
    () => emailHeld(changes.email ?? ''),
    db
      .updateTable('users')
      .set({ ...changes, updated_at: now })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow(),
  );
}

export async function emailTaken(db: Db, email: string, exceptId?: number): Promise<boolean> {
  let query = db
    .selectFrom('users')
    .select('id')
    .where((eb) => eb(eb.fn('lower', ['email']), '=', email.toLowerCase()))
    .where('deleted_at', 'is', null);
  if (exceptId !== undefined) query = query.where('id', '!=', exceptId);
  return (await query.executeTakeFirst()) !== undefined;
}

/** The columns an email's sender identity is made of (email/sender-identity.ts). */
export type SenderFields = Pick<UserRow, 'first_name' | 'last_name' | 'email' | 'sender_name' | 'sender_email' | 'postal_address'>;

/** What a user's emails are sent as: the one read of the sender fields (undefined: no such user). */
export async function findSenderFields(db: Db, userId: number): Promise<SenderFields | undefined> {
  return db
    .selectFrom('users')
    .select(['first_name', 'last_name', 'email', 'sender_name', 'sender_email', 'postal_address'])
    .where('id', '=', userId)
    .executeTakeFirst();
}

/** Whether the database holds any user at all (deleted ones too): a first start finds none. */
export async function anyUserExists(db: Db): Promise<boolean> {
  return (await db.selectFrom('users').select('id').limit(1).executeTakeFirst()) !== undefined;
}

/** The oldest active Administrator, if any. */
export async function firstActiveAdministrator(db: Db): Promise<{ id: number } | undefined> {
  return db
    .selectFrom('users')
    .select('id')
    .where(sql<boolean>`'Administrator' = ANY (roles)`)
    .where('deleted_at', 'is', null)
    .where('status', '=', 'Active')
    .orderBy('id')
    .executeTakeFirst();
}

/** The live user with this email (in any case), for the operator's `npm run admin`. */
export async function findUserByEmail(db: Db, email: string): Promise<UserRow | undefined> {
  return db
    .selectFrom('users')
    .selectAll()
    .where(sql<string>`lower(email)`, '=', email.toLowerCase())
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

/** The active Administrators, oldest first, with how each can act: a password, live API keys. */
export async function activeAdministrators(db: Db) {
  return db
    .selectFrom('users as u')
    .select((eb) => [
      'u.id',
      'u.email',
      eb('u.password_hash', 'is not', null).as('has_password'),
      eb
        .selectFrom('api_keys as k')
        .select((k) => k.fn.countAll<string>().as('n'))
        .whereRef('k.user_id', '=', 'u.id')
        .where('k.revoked_at', 'is', null)
        .as('live_keys'),
    ])
    .where(sql<boolean>`'Administrator' = ANY (u.roles)`)
    .where('u.status', '=', 'Active')
    .where('u.deleted_at', 'is', null)
    .orderBy('u.id')
    .execute();
}

/** Sets a user's password (already hashed) and ends their web sessions, as a new password does through the API. */
export async function setPasswordHash(db: Db, userId: number, passwordHash: string, now: Date): Promise<void> {
  await updateUser(db, userId, { password_hash: passwordHash }, now);
  await endUserSessions(db, userId);
}

/**
 * A user's own new password, from their account settings: the current one must be given, so a
 * browser left signed in cannot be used to take the account. The same limits as the API's field.
 * Ends every session of the user (the caller starts a new one for the browser that asked).
 */
export async function changeOwnPassword(
  db: Db,
  userId: number,
  form: { current_password: string; new_password: string },
  now: Date,
): Promise<void> {
  const user = await findUser(db, userId);
  const errors: FieldErrors = {};
  if (!form.current_password) errors.current_password = ['is needed to set a new one'];
  else if (!(await verifyPassword(form.current_password, user?.password_hash))) errors.current_password = ['is not correct'];
  if (form.new_password.length < PASSWORD_MIN_LENGTH || form.new_password.length > PASSWORD_MAX_LENGTH) {
    errors.new_password = [`must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters`];
  }
  throwIfAny(errors);
  await setPasswordHash(db, userId, await hashPassword(form.new_password), now);
}

/** A user's own time zone from their account settings (empty: none, times in UTC); the API's rule. */
export async function changeOwnTimeZone(db: Db, userId: number, timeZone: string, now: Date): Promise<UserRow> {
  const time_zone = timeZone || null;
  await checkReferences(db, { time_zone });
  return updateUser(db, userId, { time_zone }, now);
}

/** Makes a user an active Administrator again, whatever happened to them (cancelled, deleted, demoted); nothing when they are one. */
export async function reinstateAdministrator(db: Db, userId: number, now: Date): Promise<void> {
  await db
    .updateTable('users')
    .set({
      status: 'Active',
      cancelled_at: null,
      deleted_at: null,
      roles: sql<RoleName[]>`CASE WHEN 'Administrator' = ANY (roles) THEN roles ELSE array_append(roles, 'Administrator') END`,
      updated_at: now,
    })
    .where('id', '=', userId)
    .where((eb) =>
      eb.or([eb('status', '!=', 'Active'), eb('deleted_at', 'is not', null), sql<boolean>`NOT ('Administrator' = ANY (roles))`]),
    )
    .execute();
}

/** Locks a user's row until the transaction ends: writes that count something of the user's take turns. */
export async function lockUser(trx: Db, id: number): Promise<void> {
  await trx.selectFrom('users').select('id').where('id', '=', id).forUpdate().execute();
}

// ── Sending pauses (sending/brakes.ts) ──────────────────────────────────────────────────────

export interface SendingPause {
  reason: SendingPauseReason;
  complaintRate: number;
  hardBounceRate: number;
}

/** Pauses a user's sending; false when it already was paused (the first pause stands, and is announced once). */
export async function pauseSending(db: Db, userId: number, pause: SendingPause, now: Date): Promise<boolean> {
  const result = await db
    .updateTable('users')
    .set({
      sending_paused_reason: pause.reason,
      sending_paused_at: now,
      sending_paused_complaint_rate: pause.complaintRate,
      sending_paused_hard_bounce_rate: pause.hardBounceRate,
      updated_at: now,
    })
    .where('id', '=', userId)
    .where('sending_paused_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Lifts a user's pause (if any); what was held until now is let go (`sending_resumed_at`). */
export async function resumeSending(db: Db, userId: number, now: Date): Promise<UserRow | undefined> {
  return db
    .updateTable('users')
    .set({
      sending_paused_reason: null,
      sending_paused_at: null,
      sending_paused_complaint_rate: null,
      sending_paused_hard_bounce_rate: null,
      sending_resumed_at: now,
      updated_at: now,
    })
    .where('id', '=', userId)
    .returningAll()
    .executeTakeFirst();
}

/** Whether a user's sending is paused now, and when it was last resumed. */
export async function sendingPauseOf(db: Db, userId: number) {
  return db.selectFrom('users').select(['sending_paused_at', 'sending_resumed_at']).where('id', '=', userId).executeTakeFirst();
}

/** The users whose sending is paused, for /metrics. */
export async function pausedSenders(db: Db) {
  return db.selectFrom('users').select(['id', 'sending_paused_reason']).where('sending_paused_at', 'is not', null).orderBy('id').execute();
}
