import { type SqlBool, sql, type Updateable } from 'kysely';
import { type Static, Type } from 'typebox';
import type { Db } from '../db/database.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { findOwnedRow } from '../db/owned-rows.ts';
import type { ContactRow, ContactStatus, ContactsTable, Suppression } from '../db/schema.ts';
import { type Filters, runSearch, type SearchParams } from '../db/search.ts';
import { addressFreedMeanwhile, DomainError, type FieldErrors, throwIfAny, validationError } from '../errors.ts';
import { Id, Nullable, StringEnum, Timestamp, WritableBody } from '../json-schema.ts';
import { formatTimestamp, isTimeZone } from '../time.ts';
import { NANP_PHONE_RULE, normalizeNanpPhone } from './phone.ts';
import { setContactTags, tagKey, tagNamesByContact } from './tags.ts';

const CONTACT_STATUSES = [
  'Subscribed',
  'Unsubscribed',
  'Inactive - Hard Bounce',
  'Inactive - Spam Complaint',
  'Inactive - Invalid Email Address',
  'Inactive - Repeated Soft Bounce',
] as const satisfies readonly ContactStatus[];

/** The reason an email suppression gives for each status but Subscribed (docs/outcomes.md). */
const EMAIL_REASONS = {
  Unsubscribed: 'unsubscribed',
  'Inactive - Hard Bounce': 'hard_bounce',
  'Inactive - Spam Complaint': 'complaint',
  'Inactive - Invalid Email Address': 'invalid_address',
  'Inactive - Repeated Soft Bounce': 'repeated_soft_bounce',
} as const satisfies Record<Exclude<ContactStatus, 'Subscribed'>, string>;

/**
 * Email suppressions an owner may lift: the address was judged dead or failing. Never an
 * unsubscribe or a complaint — those are the person's own word (CAN-SPAM), undone only by them.
 */
const LIFTABLE_EMAIL_REASONS = ['hard_bounce', 'repeated_soft_bounce', 'invalid_address'] as const;

/** What a suppression the owner set through the API or an import says (and it names no delivery). */
const SET_BY_OWNER = 'Set by the owner';

/** The statuses that say the person said no, when the owner did not set them. */
const PERSONS_STATUSES: readonly ContactStatus[] = ['Unsubscribed', 'Inactive - Spam Complaint'];

/**
 * Whether a contact's email is stopped by the person's own word: an unsubscribe or a complaint
 * that came from them (a link, a mailed unsubscribe, a feedback loop, a relay's report), or from
 * before suppressions were recorded (nobody can tell whose it was). No owner's write changes it;
 * migration 0039's `contact_persons_word` is the same rule in SQL, and its triggers keep it.
 */
function isPersonsWord(status: ContactStatus, suppression: Suppression | null): boolean {
  if (!PERSONS_STATUSES.includes(status)) return false;
  return !(suppression?.description === SET_BY_OWNER && suppression.delivery_id === null);
}

/** The refusal of a write that would change what the person said: a 409 naming when and how. */
function personsWordRefused(who: string, status: ContactStatus, suppression: Suppression | null): DomainError {
  const said = status === 'Unsubscribed' ? 'unsubscribed' : 'complained of spam';
  const how = [suppression?.delivery_id ? `through delivery ${suppression.delivery_id}` : '', suppression?.at ? `on ${suppression.at}` : '']
    .filter(Boolean)
    .join(' ');
  const why = `${said}${how ? ` ${how}` : ''}: that is the person's own word, which only they can undo`;
  return new DomainError('conflict', `${who} ${why}.`, { status: [`cannot be changed from ${status}: the person ${why}`] });
}

const SuppressionSchema = Type.Object(
  {
    reason: Type.String({ description: "Why: one of the channel's classifications (docs/outcomes.md), e.g. hard_bounce, landline" }),
    at: Nullable({ ...Timestamp, description: 'When it was decided (null for contacts made inactive before this was recorded)' }),
    delivery_id: Nullable({ ...Id, description: 'The delivery whose outcome decided it' }),
    description: Nullable(Type.String({ description: "The provider's words, when it gave any" })),
  },
  { description: 'Why this channel no longer reaches the contact' },
);

/** The writable scalar fields of a contact, already validated and normalised. */
export type ContactFields = Pick<
  Updateable<ContactsTable>,
  'first_name' | 'last_name' | 'email' | 'phone' | 'time_zone' | 'status' | 'email_suppression' | 'external_id'
>;

const MAX_TAGS = 100;

export const Contact = Type.Object({
  id: Id,
  user_id: Id,
  first_name: Nullable(Type.String()),
  last_name: Nullable(Type.String()),
  full_name: Nullable(Type.String()),
  email: Nullable(Type.String()),
  phone: Nullable(Type.String({ description: '10 digits (North American numbering plan)' })),
  time_zone: Nullable(Type.String()),
  status: StringEnum(CONTACT_STATUSES),
  email_suppression: Nullable(SuppressionSchema),
  phone_suppression: Nullable(SuppressionSchema),
  tags: Type.Array(Type.String(), { description: 'Tag names, alphabetical' }),
  external_id: Nullable(Type.String({ description: "Your own id for the contact (a CRM's): unique among the owner's contacts" })),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
});

// Nothing is required on its own, but a contact needs an email or a phone (checked with the stored
// values on update); so create and update share one body.
export const ContactBody = WritableBody(
  Type.Partial(
    Type.Object({
      first_name: Nullable(Type.String({ maxLength: 255 })),
      last_name: Nullable(Type.String({ maxLength: 255 })),
      email: Nullable(Type.String({ format: 'email', maxLength: 254 })),
      phone: Nullable(
        Type.String({ maxLength: 32, description: 'US/Canada number; punctuation and +1 accepted', examples: ['(727) 232-9117'] }),
      ),
      time_zone: Nullable(Type.String({ maxLength: 64, description: 'IANA time zone, e.g. America/New_York' })),
      status: StringEnum(CONTACT_STATUSES, {
        description:
          'Only Subscribed contacts are sent to. A contact who unsubscribed or complained themselves keeps that status: ' +
          "changing it is a 409 (the person's own word, which only they can undo), and a contact given their address takes it.",
      }),
      external_id: Nullable(
        Type.String({
          minLength: 1,
          maxLength: 255,
          description: "Your own id for the contact (a CRM's): unique among the owner's contacts",
        }),
      ),
      tags: Type.Array(Type.String({ minLength: 1, maxLength: 255 }), {
        maxItems: MAX_TAGS,
        description: 'Tag names; unknown names are created. On update, replaces every tag of the contact.',
      }),
    }),
  ).properties,
  ['id', 'user_id', 'full_name', 'email_suppression', 'phone_suppression', 'created_at', 'updated_at', 'deleted_at'],
);
export type ContactInput = Static<typeof ContactBody>;

const TEXT = (column: string) => ({ kind: 'text', column }) as const;
export const CONTACT_FILTERS: Filters = {
  id: { kind: 'id', column: 'id' },
  first_name: TEXT('first_name'),
  last_name: TEXT('last_name'),
  email: TEXT('email'),
  // Matches within the stored 10 digits: `phone=727` finds an area code.
  phone: TEXT('phone'),
  time_zone: { kind: 'exact', column: 'time_zone' },
  status: { kind: 'enum', column: 'status', values: CONTACT_STATUSES },
  external_id: { kind: 'exact', column: 'external_id' },
};

/** Validates and normalises what a body changes; `current` is the stored contact on update. */
export function contactChanges(body: ContactInput, now: Date, current?: ContactRow): { fields: ContactFields; tags?: string[] } {
  const errors: FieldErrors = {};
  const fields: ContactFields = {};
  // Blank names are no names: the greeting without a first name is then used.
  if (body.first_name !== undefined) fields.first_name = body.first_name?.trim() || null;
  if (body.last_name !== undefined) fields.last_name = body.last_name?.trim() || null;
  if (body.email !== undefined) fields.email = body.email;
  if (body.external_id !== undefined) fields.external_id = body.external_id;
  if (body.status !== undefined && body.status !== current?.status) {
    if (current && isPersonsWord(current.status, current.email_suppression)) {
      throw personsWordRefused(`Contact ${current.id}`, current.status, current.email_suppression);
    }
    fields.status = body.status;
    // The owner's own word: why the address no longer receives, or nothing once it does again.
    fields.email_suppression = body.status === 'Subscribed' ? null : JSON.stringify(emailSuppression(body.status, now, null, SET_BY_OWNER));
  }
  if (body.phone !== undefined) {
    const phone = body.phone === null ? null : normalizeNanpPhone(body.phone);
    if (body.phone !== null && phone === null) errors.phone = [NANP_PHONE_RULE];
    else fields.phone = phone;
  }
  if (body.time_zone !== undefined) {
    if (body.time_zone !== null && !isTimeZone(body.time_zone)) errors.time_zone = ['must be an IANA time zone such as America/New_York'];
    else fields.time_zone = body.time_zone;
  }
  const email = fields.email !== undefined ? fields.email : (current?.email ?? null);
  const phone = fields.phone !== undefined ? fields.phone : (current?.phone ?? null);
  if (email === null && phone === null && !errors.phone) {
    errors.email = ['is required when there is no phone'];
    errors.phone = ['is required when there is no email'];
  }
  const tags = body.tags === undefined ? undefined : uniqueTagNames(body.tags, errors);
  throwIfAny(errors);
  return { fields, tags };
}

/** Trimmed tag names, each once whatever its case; blank ones are reported by position. */
function uniqueTagNames(names: string[], errors: FieldErrors): string[] {
  const seen = new Map<string, string>();
  names.forEach((name, index) => {
    if (name.trim() === '') errors[`tags.${index}`] = ['must not be blank'];
    else if (!seen.has(tagKey(name))) seen.set(tagKey(name), name.trim());
  });
  return [...seen.values()];
}

/** "First Last", either part alone, or null for a contact known only by address or number. */
export function contactFullName(row: Pick<ContactRow, 'first_name' | 'last_name'>): string | null {
  return [row.first_name, row.last_name].filter(Boolean).join(' ') || null;
}

/** The API shape of a contact: the one place contact rows become JSON. */
export function toApiContact(row: ContactRow, tags: string[]) {
  return {
    id: row.id,
    user_id: row.user_id,
    first_name: row.first_name,
    last_name: row.last_name,
    full_name: contactFullName(row),
    email: row.email,
    phone: row.phone,
    time_zone: row.time_zone,
    status: row.status,
    email_suppression: emailSuppressionOf(row),
    phone_suppression: row.phone_suppression ? toApiSuppression(row.phone_suppression) : null,
    tags,
    external_id: row.external_id ?? null,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatTimestamp(row.deleted_at),
  };
}

/** A suppression as the API shows it: its fields in the schema's order (jsonb keeps its own). */
function toApiSuppression({ reason, at, delivery_id, description }: Suppression): Suppression {
  return { reason, at, delivery_id, description };
}

/** API shapes for a page of contacts, their tags read in one query. */
export async function toApiContacts(db: Db, userId: number, rows: ContactRow[]) {
  const tags = await tagNamesByContact(
    db,
    userId,
    rows.map((row) => row.id),
  );
  return rows.map((row) => toApiContact(row, tags.get(row.id) ?? []));
}

/** The owner's live contacts of these ids (those that exist). */
export async function findLiveContacts(db: Db, userId: number, ids: readonly number[]): Promise<ContactRow[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom('contacts')
    .selectAll()
    .where('user_id', '=', userId)
    .where('id', 'in', ids)
    .where('deleted_at', 'is', null)
    .execute();
}

export function findContact(db: Db, id: number) {
  return findOwnedRow(db, db.selectFrom('contacts').selectAll().where('id', '=', id).where('deleted_at', 'is', null));
}

/** One page of an owner's contacts, filtered by `CONTACT_FILTERS`, as API shapes. */
export async function searchContacts(db: Db, userId: number, params: SearchParams) {
  const live = db.selectFrom('contacts').selectAll().where('deleted_at', 'is', null);
  const result = await runSearch(live, CONTACT_FILTERS, params, 'id', { owner: { column: 'user_id', id: userId } });
  return { ...result, rows: await toApiContacts(db, userId, result.rows) };
}

/**
 * Which live contacts hold an address in the unique index of migration 0021: all but those marked
 * `duplicate_email` (contacts that shared an address before it, never made since). Every live
 * address has exactly one such holder, its oldest live contact.
 */
const HOLDS_ADDRESS = sql<SqlBool>`deleted_at IS NULL AND email IS NOT NULL AND NOT duplicate_email`;

/** The index that refuses a second live contact of an owner with one address (any case). */
const CONTACT_EMAIL_KEY = 'contacts_owner_email_key';

/**
 * The owner's live contact with this email address, in any letter case (the one a message to that
 * address reaches, and the oldest if older data has several): one probe of the unique index. Bulk
 * import updates the contact it finds; creating one, or giving another contact its address, is
 * refused naming it.
 */
async function findContactByEmail(db: Db, userId: number, email: string): Promise<ContactRow | undefined> {
  return db
    .selectFrom('contacts')
    .selectAll()
    .where('user_id', '=', userId)
    .where((eb) => eb(eb.fn('lower', ['email']), '=', eb.fn('lower', [eb.val(email)])))
    .where(HOLDS_ADDRESS)
    .executeTakeFirst();
}

function emailTaken(holder: ContactRow): DomainError {
  return new DomainError('conflict', `Contact ${holder.id} already has the email address ${holder.email}; update that contact instead.`, {
    email: [`is already the email address of contact ${holder.id}`],
  });
}

/** The index that refuses a second live contact of an owner with one external id. */
const CONTACT_EXTERNAL_ID_KEY = 'contacts_owner_external_id_key';

/** A write refused because another live contact of the owner has its external id: the 409 naming it. */
async function externalIdTaken<T>(db: Db, userId: number, externalId: string | null | undefined, write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (error) {
    if (!externalId || !isUniqueViolation(error, CONTACT_EXTERNAL_ID_KEY)) throw error;
    const holder = await db
      .selectFrom('contacts')
      .select('id')
      .where('user_id', '=', userId)
      .where('external_id', '=', externalId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    throw new DomainError('conflict', `Contact ${holder?.id ?? '?'} already has the external id ${externalId}.`, {
      external_id: [`is already the external id of contact ${holder?.id ?? '?'}`],
    });
  }
}

/** What a write gives back when the unique index turned its address away. */
const REFUSED: unique symbol = Symbol('address refused');

/**
 * Runs a write that sets `email`, which answers REFUSED when the unique index turned the address
 * away. Refused, the answer is the 409 naming the contact that holds the address; when none does
 * any more (deleted or readdressed meanwhile) the write is tried once again.
 */
async function writingAddress<T>(db: Db, userId: number, email: string, write: () => Promise<T | typeof REFUSED>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const result = await write();
    if (result !== REFUSED) return result;
    const holder = await findContactByEmail(db, userId, email);
    if (holder) throw emailTaken(holder);
    if (attempt === 2) throw addressFreedMeanwhile(email);
  }
}

/**
 * Creates a contact with its tags in one transaction: a failure leaves neither behind. The unique
 * index of migration 0021 decides whether the address is free, so a create without tags is one
 * statement (`INSERT … ON CONFLICT DO NOTHING`, which waits for a concurrent write of the address
 * to commit or roll back); only when it inserts nothing is the holder read, to name it in the 409.
 */
export async function createContact(db: Db, userId: number, body: ContactInput, now: Date) {
  const { fields, tags = [] } = contactChanges(body, now);
  await refuseOverOptOut(db, userId, fields.email, body.status);
  const insert = (trx: Db) =>
    trx
      .insertInto('contacts')
      .values({ user_id: userId, ...fields, created_at: now, updated_at: now })
      .onConflict((oc) => oc.expression(sql`user_id, lower(email)`).where(HOLDS_ADDRESS).doNothing())
      .returningAll()
      .executeTakeFirst();
  // Only an address can make the insert skip its row.
  const created = (trx: Db): Promise<ContactRow> =>
    writingAddress(trx, userId, fields.email as string, async () => (await insert(trx)) ?? REFUSED);
  if (tags.length === 0) return toApiContact(await externalIdTaken(db, userId, fields.external_id, created(db)), []);
  return externalIdTaken(
    db,
    userId,
    fields.external_id,
    db.transaction().execute(async (trx) => {
      const row = await created(trx);
      return toApiContact(row, await setContactTags(trx, userId, row.id, tags, now));
    }),
  );
}

/**
 * Applies the fields present; `tags`, when given, replaces the contact's whole set. Undefined
 * when the contact was deleted meanwhile. An address another live contact of the owner holds is
 * refused by the unique index, and answered with a 409 naming that contact.
 */
export async function updateContact(db: Db, contact: ContactRow, body: ContactInput, now: Date) {
  const { fields, tags } = contactChanges(body, now, contact);
  if (fields.email && fields.email.toLowerCase() !== contact.email?.toLowerCase()) {
    await refuseOverOptOut(db, contact.user_id, fields.email, body.status ?? undefined);
  }
  const update = () =>
    db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable('contacts')
        .set({ ...fields, updated_at: now })
        .where('user_id', '=', contact.user_id)
        .where('id', '=', contact.id)
        .where('deleted_at', 'is', null)
        .returningAll()
        .executeTakeFirst();
      if (!row) return undefined;
      const names =
        tags === undefined
          ? ((await tagNamesByContact(trx, row.user_id, [row.id])).get(row.id) ?? [])
          : await setContactTags(trx, row.user_id, row.id, tags, now);
      return toApiContact(row, names);
    });
  if (!fields.email) return externalIdTaken(db, contact.user_id, fields.external_id, update());
  const email = fields.email;
  return externalIdTaken(
    db,
    contact.user_id,
    fields.external_id,
    writingAddress(db, contact.user_id, email, () =>
      update().catch((error: unknown): typeof REFUSED => {
        if (isUniqueViolation(error, CONTACT_EMAIL_KEY)) return REFUSED;
        throw error;
      }),
    ),
  );
}

/**
 * A write that gives a contact an address whose person said no (email_opt_outs) takes their word
 * (migration 0039's trigger); one that asks for another status outright is refused, saying why.
 */
async function refuseOverOptOut(db: Db, userId: number, email: string | null | undefined, status: ContactStatus | undefined) {
  if (!email || status === undefined) return;
  const word = (await optOutsOf(db, userId, [email])).get(email.toLowerCase());
  if (word && word.status !== status) throw personsWordRefused(`The person at ${email}`, word.status, word.suppression);
}

/** The person's word kept for each of these addresses that has one, by address in lower case. */
async function optOutsOf(db: Db, userId: number, emails: readonly string[]) {
  const rows = await db
    .selectFrom('email_opt_outs')
    .select(['email_key', 'status', 'suppression'])
    .where('user_id', '=', userId)
    .where(
      'email_key',
      'in',
      emails.map((email) => email.toLowerCase()),
    )
    .execute();
  return new Map(rows.map((row) => [row.email_key, { status: row.status as ContactStatus, suppression: row.suppression }]));
}

/**
 * Soft delete: the row and its tag links stay for the record; every read skips it from now on, and
 * its address is free (or held by the next oldest contact with it, from before migration 0021).
 */
export async function deleteContact(db: Db, contact: ContactRow, now: Date): Promise<void> {
  await db.updateTable('contacts').set({ deleted_at: now }).where('user_id', '=', contact.user_id).where('id', '=', contact.id).execute();
}

/** The email suppression that goes with a status but Subscribed. */
function emailSuppression(
  status: Exclude<ContactStatus, 'Subscribed'>,
  at: Date | null,
  deliveryId: number | null,
  description: string | null,
): Suppression {
  return { reason: EMAIL_REASONS[status], at: at && formatTimestamp(at), delivery_id: deliveryId, description };
}

/** What a delivery's outcome makes of its contact: a status (email) or a suppressed phone (voicemail). */
export interface ContactChange {
  contact_id: number;
  user_id: number;
  /** Email: the status it becomes, if it is still Subscribed. */
  status?: Exclude<ContactStatus, 'Subscribed'>;
  /** Voicemail: why its number no longer receives, if it still does. */
  phone_reason?: string;
  at: Date;
  delivery_id: number | null;
  description: string | null;
}

/**
 * What delivery outcomes make of contacts: an email becomes `status` (a hard bounce, a complaint,
 * an unsubscribe) if it is still Subscribed, with its suppression — one who unsubscribed,
 * complained or bounced stays so; but the person's own word (an unsubscribe, a complaint) also
 * replaces what the owner set or a verdict on the address (a hard bounce), which an owner could
 * lift, and is then kept. A phone number is suppressed (a landline, a DNC hit) if it is not
 * already. Locked in id order, so that concurrent batches never deadlock.
 */
export async function changeContactsByOutcome(db: Db, changes: readonly ContactChange[], now: Date): Promise<void> {
  if (changes.length === 0) return;
  const ordered = [...changes]
    .sort((a, b) => a.contact_id - b.contact_id)
    .map((c) => ({
      contact_id: c.contact_id,
      user_id: c.user_id,
      status: c.status ?? null,
      email_suppression: c.status ? emailSuppression(c.status, c.at, c.delivery_id, c.description) : null,
      phone_suppression: c.phone_reason
        ? ({
            reason: c.phone_reason,
            at: formatTimestamp(c.at),
            delivery_id: c.delivery_id,
            description: c.description,
          } satisfies Suppression)
        : null,
    }));
  // Whether the email's status moves: from Subscribed, or to the person's word from anything else.
  const moves = sql`x.status IS NOT NULL AND (c.status = 'Subscribed' OR (contact_persons_word(x.status, x.email_suppression)
    AND NOT contact_persons_word(c.status, c.email_suppression)))`;
  await sql`
    WITH x AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(ordered)}::jsonb)
        AS x(contact_id bigint, user_id bigint, status text, email_suppression jsonb, phone_suppression jsonb)
    ), locked AS (
      SELECT c.id FROM contacts c JOIN x ON x.contact_id = c.id AND x.user_id = c.user_id
      WHERE (${moves}) OR (x.phone_suppression IS NOT NULL AND c.phone_suppression IS NULL)
      ORDER BY c.id
      FOR NO KEY UPDATE OF c
    )
    UPDATE contacts c
    SET status = CASE WHEN ${moves} THEN x.status ELSE c.status END,
        email_suppression = CASE WHEN ${moves} THEN x.email_suppression ELSE c.email_suppression END,
        phone_suppression = coalesce(c.phone_suppression, x.phone_suppression),
        updated_at = ${now}
    FROM x JOIN locked ON locked.id = x.contact_id
    WHERE c.id = x.contact_id AND c.user_id = x.user_id`.execute(db);
}

export const LiftBody = WritableBody(
  {
    channel: StringEnum(['email', 'phone'] as const, { description: 'Which suppressions: of email addresses or of phone numbers' }),
    reasons: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        minItems: 1,
        maxItems: 20,
        uniqueItems: true,
        description: `Only suppressions for these reasons (email: ${LIFTABLE_EMAIL_REASONS.join(', ')}; default: every liftable one)`,
      }),
    ),
    since: Type.Optional(
      Type.String({ format: 'date-time', description: 'Only suppressions decided at or after this time (ISO 8601 with an offset or Z)' }),
    ),
    until: Type.Optional(
      Type.String({ format: 'date-time', description: 'Only suppressions decided before this time (ISO 8601 with an offset or Z)' }),
    ),
    contact_ids: Type.Optional(Type.Array(Id, { minItems: 1, maxItems: 1000, uniqueItems: true, description: 'Only these contacts' })),
  },
  [],
);
Object.assign(LiftBody, { examples: [{ channel: 'email', reasons: ['hard_bounce'], since: '2026-11-20T00:00:00Z' }] });
export const LiftResult = Type.Object({ lifted: Type.Integer({ minimum: 0, description: 'How many contacts receive again' }) });

/**
 * Lets an owner's contacts receive again on one channel, in bulk: by reason, by the time the
 * suppression was decided, by contact. Email: only what `LIFTABLE_EMAIL_REASONS` allows; the
 * contact becomes Subscribed. Phone: the number is no longer suppressed. Returns how many changed.
 */
export async function liftSuppressions(db: Db, userId: number, body: Static<typeof LiftBody>, now: Date): Promise<number> {
  const column = body.channel === 'email' ? sql.ref('email_suppression') : sql.ref('phone_suppression');
  if (body.channel === 'email') {
    const refused = (body.reasons ?? []).filter((r) => !(LIFTABLE_EMAIL_REASONS as readonly string[]).includes(r));
    if (refused.length > 0) {
      throw validationError({
        reasons: [
          `may name only ${LIFTABLE_EMAIL_REASONS.join(', ')} for email: an unsubscribe or a complaint is the person's own word, which only they can undo (${refused.join(', ')})`,
        ],
      });
    }
  }
  const reasons = body.reasons ?? (body.channel === 'email' ? [...LIFTABLE_EMAIL_REASONS] : null);
  // An email suppression from before suppressions were recorded is read from the status (toApiContact).
  const reason =
    body.channel === 'email' ? sql`coalesce(email_suppression ->> 'reason', ${statusReasons()})` : sql`phone_suppression ->> 'reason'`;
  const at = sql`(${column} ->> 'at')::timestamptz`;
  const conditions = [
    sql`user_id = ${userId}`,
    sql`deleted_at IS NULL`,
    body.channel === 'email' ? sql`status <> 'Subscribed'` : sql`phone_suppression IS NOT NULL`,
  ];
  if (reasons) conditions.push(sql`${reason} = ANY (${reasons}::text[])`);
  if (body.since) conditions.push(sql`${at} >= ${new Date(body.since)}`);
  if (body.until) conditions.push(sql`${at} < ${new Date(body.until)}`);
  if (body.contact_ids) conditions.push(sql`id = ANY (${body.contact_ids}::bigint[])`);
  const set =
    body.channel === 'email'
      ? sql`status = 'Subscribed', email_suppression = NULL, updated_at = ${now}`
      : sql`phone_suppression = NULL, updated_at = ${now}`;
  const result = await sql`UPDATE contacts SET ${set} WHERE ${sql.join(conditions, sql` AND `)}`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** `CASE status WHEN … THEN reason END`: the reason of a suppression that predates the column. */
function statusReasons() {
  return sql`CASE status ${sql.join(
    Object.entries(EMAIL_REASONS).map(([status, reason]) => sql`WHEN ${status} THEN ${reason}`),
    sql` `,
  )} END`;
}

// ── Bulk import (import.ts) ──────────────────────────────────────────────────────────────────

/**
 * The owner's contacts holding these addresses, in any case: one probe of the unique index per
 * address, whatever the statistics say. The lateral subquery's LIMIT 1 (the unique index holds one
 * contact an address anyway) keeps the planner from flattening it into a join: as a join, with
 * fresh statistics as much as with stale ones, it hashed the addresses and read every contact of
 * the owner, 12–14 ms for 100 addresses against 20,000 contacts on PGlite, growing with them,
 * where the probes take under 1 ms. No ORDER BY, which would invite a walk in id order. The
 * database lowers the address, as its index does.
 */
export async function contactsHoldingEmails(db: Db, userId: number, emails: readonly string[]): Promise<{ id: number; email: string }[]> {
  const { rows } = await sql<{ id: number; email: string }>`
    SELECT c.id, k.email FROM unnest(${emails}::text[]) AS k(email)
    CROSS JOIN LATERAL (
      SELECT id FROM contacts
      WHERE user_id = ${userId} AND lower(email) = lower(k.email) AND ${HOLDS_ADDRESS}
      LIMIT 1
    ) c`.execute(db);
  return rows.map((row) => ({ id: Number(row.id), email: row.email }));
}

/** The owner's live contacts without an email that have one of these numbers (migration 0014's index). */
export async function contactsWithPhonesOnly(
  db: Db,
  userId: number,
  phones: readonly string[],
): Promise<{ id: number; phone: string | null }[]> {
  // No ORDER BY: it would tempt the planner into walking all the owner's contacts in id order.
  return db
    .selectFrom('contacts')
    .select(['id', 'phone'])
    .where('user_id', '=', userId)
    .where('deleted_at', 'is', null)
    .where('email', 'is', null)
    .where(sql<boolean>`phone = ANY(${phones}::text[])`)
    .execute();
}

/**
 * Inserts contacts in one statement over arrays (a handful of parameters, not thousands), in the
 * order given; a row whose address a live contact of the owner holds is left out. Answers the
 * inserted rows' ids and addresses.
 */
export async function insertContactRows(
  db: Db,
  userId: number,
  rows: readonly ContactFields[],
  now: Date,
): Promise<{ id: number; email: string | null }[]> {
  const column = (name: keyof ContactFields) => sql`${rows.map((row) => row[name] ?? null)}::text[]`;
  const statuses = rows.map((row) => row.status ?? 'Subscribed');
  const { rows: inserted } = await sql<{ id: number; email: string | null }>`
    INSERT INTO contacts (user_id, first_name, last_name, email, phone, time_zone, status, email_suppression, created_at, updated_at)
    SELECT ${userId}, v.first_name, v.last_name, v.email, v.phone, v.time_zone, v.status, v.email_suppression::jsonb, ${now}, ${now}
    FROM unnest(${column('first_name')}, ${column('last_name')}, ${column('email')}, ${column('phone')}, ${column('time_zone')},
                ${statuses}::text[], ${column('email_suppression')})
         WITH ORDINALITY AS v(first_name, last_name, email, phone, time_zone, status, email_suppression, n)
    ORDER BY v.n
    ON CONFLICT (user_id, lower(email)) WHERE ${HOLDS_ADDRESS} DO NOTHING
    RETURNING id, email`.execute(db);
  return inserted.map((row) => ({ id: Number(row.id), email: row.email }));
}

/**
 * Sets `columns` of the owner's contacts to each row's values, in one `UPDATE … FROM unnest(…)`.
 * A status that changes brings its suppression (the owner's, as `contactChanges` made it); one
 * that stays keeps the suppression it has.
 */
export async function updateContactColumns(
  db: Db,
  userId: number,
  rows: readonly { id: number; fields: ContactFields }[],
  columns: readonly Exclude<keyof ContactFields, 'email' | 'email_suppression'>[],
  now: Date,
): Promise<void> {
  const all: Exclude<keyof ContactFields, 'email'>[] = columns.includes('status') ? [...columns, 'email_suppression'] : [...columns];
  const set = (column: (typeof all)[number]) =>
    column === 'email_suppression'
      ? sql`email_suppression = CASE WHEN c.status IS DISTINCT FROM v.status THEN v.email_suppression::jsonb ELSE c.email_suppression END`
      : sql`${sql.ref(column)} = v.${sql.ref(column)}`;
  const sets = [sql`updated_at = ${now}`, ...all.map(set)];
  const arrays = [
    sql`${sql.val(rows.map((row) => row.id))}::bigint[]`,
    ...all.map((column) => sql`${sql.val(rows.map((row) => row.fields[column] ?? null))}::text[]`),
  ];
  const names = [sql.ref('id'), ...all.map((column) => sql.ref(column))];
  await sql`UPDATE contacts c SET ${sql.join(sets)}
    FROM unnest(${sql.join(arrays)}) AS v(${sql.join(names)})
    WHERE c.user_id = ${userId} AND c.id = v.id`.execute(db);
}

/** The person's own word on a contact or an address: its status and why. */
interface PersonsWord {
  status: ContactStatus;
  suppression: Suppression | null;
}

/**
 * For an import's rows that name a status: the person's own word each would change, if any — of
 * the matched contacts, by id, and of the addresses of the rows that match none, by address in
 * lower case (email_opt_outs).
 */
export async function personsWordOf(
  db: Db,
  userId: number,
  ids: readonly number[],
  emails: readonly string[],
): Promise<{ ofContact: Map<number, PersonsWord>; ofEmail: Map<string, PersonsWord> }> {
  const contacts =
    ids.length === 0
      ? []
      : await db
          .selectFrom('contacts')
          .select(['id', 'status', 'email_suppression'])
          .where('user_id', '=', userId)
          .where('id', 'in', ids)
          .where(sql<SqlBool>`contact_persons_word(status, email_suppression)`)
          .execute();
  return {
    ofContact: new Map(contacts.map((c) => [Number(c.id), { status: c.status, suppression: c.email_suppression }])),
    ofEmail: emails.length === 0 ? new Map() : await optOutsOf(db, userId, emails),
  };
}

/** Why a row may not set `status` over the person's word (an import's refusal), or undefined when it may. */
export function personsWordErrors(word: PersonsWord, status: ContactStatus): FieldErrors | undefined {
  return status === word.status ? undefined : personsWordRefused('', word.status, word.suppression).errors;
}

/**
 * Whether the contacts table changed by more than its size at its last ANALYZE (and by at least
 * `minimum` rows) since: autovacuum's own test with a scale factor of 1, applied at once instead
 * of at its next round. PostgreSQL's statistics views say it; PGlite's stay at zero (false).
 */
export async function contactStatisticsStale(db: Db, minimum: number): Promise<boolean> {
  const { rows } = await sql<{ stale: boolean }>`
    SELECT s.n_mod_since_analyze > greatest(c.reltuples, ${minimum}) AS stale
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE s.relid = 'contacts'::regclass`.execute(db);
  return rows[0]?.stale === true;
}

/**
 * Fresh planner statistics for the contacts table (a bulk import changes it faster than autovacuum
 * looks). `quick`: from a sample of 3,000 rows (statistics target 10) rather than 30,000; on PGlite,
 * where ANALYZE runs on the event loop, that is some 30 ms of it for 50,000 contacts, not 250.
 */
export async function analyzeContacts(db: Db, { quick = false } = {}): Promise<void> {
  if (!quick) {
    await sql`ANALYZE contacts`.execute(db);
    return;
  }
  await db.transaction().execute(async (trx) => {
    await sql`SET LOCAL default_statistics_target = 10`.execute(trx);
    await sql`ANALYZE contacts`.execute(trx);
  });
}

// ── The suppressions page (web/pages/suppressions.ts) ────────────────────────────────────────

/** A contact that one channel or both no longer reach, with why (as the API's contact shows it). */
export interface SuppressedContact {
  id: number;
  first_name: string | null;
  last_name: string | null;
  email: string | null;
  phone: string | null;
  email_suppression: Suppression | null;
  phone_suppression: Suppression | null;
  /** Whether the owner may lift the email suppression: never an unsubscribe or a complaint (the person's own word). */
  email_liftable: boolean;
}

/**
 * An owner's live contacts with a suppressed email or phone, by id after `afterId` (keys, never an
 * offset), or only those of `onlyIds`: the suppressions page. Each suppression reads as
 * `toApiContact` shows it.
 */
export async function suppressedContactsAfter(
  db: Db,
  userId: number,
  afterId: number,
  limit: number,
  onlyIds?: readonly number[],
): Promise<SuppressedContact[]> {
  let query = db
    .selectFrom('contacts')
    .select(['id', 'first_name', 'last_name', 'email', 'phone', 'status', 'email_suppression', 'phone_suppression'])
    .where('user_id', '=', userId)
    .where('deleted_at', 'is', null)
    .where('id', '>', afterId)
    .where((eb) => eb.or([eb('status', '<>', 'Subscribed'), eb('phone_suppression', 'is not', null)]))
    .orderBy('id')
    .limit(limit);
  if (onlyIds) query = query.where('id', 'in', onlyIds.length > 0 ? onlyIds : [0]);
  const rows = await query.execute();
  return rows.map((row) => ({
    id: row.id,
    first_name: row.first_name,
    last_name: row.last_name,
    email: row.email,
    phone: row.phone,
    email_suppression: emailSuppressionOf(row),
    phone_suppression: row.phone_suppression ? toApiSuppression(row.phone_suppression) : null,
    email_liftable: (LIFTABLE_EMAIL_REASONS as readonly string[]).includes(emailSuppressionOf(row)?.reason ?? ''),
  }));
}

/** A contact's email suppression as the API shows it (`toApiContact`), or null while Subscribed. */
function emailSuppressionOf(row: Pick<ContactRow, 'status' | 'email_suppression'>): Suppression | null {
  if (row.status === 'Subscribed') return null;
  return toApiSuppression(row.email_suppression ?? emailSuppression(row.status, null, null, null));
}
