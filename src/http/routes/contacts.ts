import { type Static, Type } from 'typebox';
import type { App, AppContext } from '../../app.ts';
import {
  CONTACT_STATUSES,
  type ContactFields,
  deleteContact,
  insertContact,
  toApiContacts,
  updateContact,
} from '../../contacts/contacts.ts';
import { NANP_PHONE_RULE, normalizeNanpPhone } from '../../contacts/phone.ts';
import { tagKey } from '../../contacts/tags.ts';
import { findOwnedRow } from '../../db/owned-rows.ts';
import type { ContactRow } from '../../db/schema.ts';
import { type Principal, requireReachableResource, requireReachableUser } from '../../identity/access.ts';
import { findUser } from '../../identity/users.ts';
import { isTimeZone } from '../../time.ts';
import { type FieldErrors, HttpError, validationError } from '../problems.ts';
import {
  AUTHENTICATED_ERRORS,
  Id,
  IdParams,
  Nullable,
  problems,
  StringEnum,
  Success,
  Timestamp,
  UserIdParams,
  WritableBody,
} from '../schemas.ts';
import { envelopeSchema, type Filters, searchPage, searchQuery } from '../search.ts';

const MAX_TAGS = 100;

const Contact = Type.Object({
  id: Id,
  user_id: Id,
  first_name: Nullable(Type.String()),
  last_name: Nullable(Type.String()),
  full_name: Nullable(Type.String()),
  email: Nullable(Type.String()),
  phone: Nullable(Type.String({ description: '10 digits (North American numbering plan)' })),
  time_zone: Nullable(Type.String()),
  status: StringEnum(CONTACT_STATUSES),
  tags: Type.Array(Type.String(), { description: 'Tag names, alphabetical' }),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
});

// Nothing is required on its own, but a contact needs an email or a phone (checked with the stored
// values on update); so create and update share one body.
const ContactBody = WritableBody(
  Type.Partial(
    Type.Object({
      first_name: Nullable(Type.String({ maxLength: 255 })),
      last_name: Nullable(Type.String({ maxLength: 255 })),
      email: Nullable(Type.String({ format: 'email', maxLength: 254 })),
      phone: Nullable(
        Type.String({ maxLength: 32, description: 'US/Canada number; punctuation and +1 accepted', examples: ['(727) 232-9117'] }),
      ),
      time_zone: Nullable(Type.String({ maxLength: 64, description: 'IANA time zone, e.g. America/New_York' })),
      status: StringEnum(CONTACT_STATUSES),
      tags: Type.Array(Type.String({ minLength: 1, maxLength: 255 }), {
        maxItems: MAX_TAGS,
        description: 'Tag names; unknown names are created. On update, replaces every tag of the contact.',
      }),
    }),
  ).properties,
  ['id', 'user_id', 'full_name', 'created_at', 'updated_at', 'deleted_at'],
);
type ContactInput = Static<typeof ContactBody>;

const TEXT = (column: string) => ({ kind: 'text', column }) as const;
const FILTERS: Filters = {
  id: { kind: 'id', column: 'id' },
  first_name: TEXT('first_name'),
  last_name: TEXT('last_name'),
  email: TEXT('email'),
  // Matches within the stored 10 digits: `phone=727` finds an area code.
  phone: TEXT('phone'),
  time_zone: { kind: 'exact', column: 'time_zone' },
  status: { kind: 'enum', column: 'status', values: CONTACT_STATUSES },
};

/** Validates and normalises what a body changes; `current` is the stored contact on update. */
function contactChanges(body: ContactInput, current?: ContactRow): { fields: ContactFields; tags?: string[] } {
  const errors: FieldErrors = {};
  const fields: ContactFields = {};
  // Blank names are no names: the greeting without a first name is then used.
  if (body.first_name !== undefined) fields.first_name = body.first_name?.trim() || null;
  if (body.last_name !== undefined) fields.last_name = body.last_name?.trim() || null;
  if (body.email !== undefined) fields.email = body.email;
  if (body.status !== undefined) fields.status = body.status;
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
  if (Object.keys(errors).length > 0) throw validationError(errors);
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

/** Contacts: reachable through their owner, as every owned resource (identity/access.ts). */
export async function contactRoutes(app: App, { database: { db }, config }: AppContext): Promise<void> {
  const tags = ['Contacts'];
  const errors = problems(...AUTHENTICATED_ERRORS);

  async function reachableContact(principal: Principal, id: number): Promise<ContactRow> {
    return requireReachableResource(principal, await findOwnedRow(db, 'contacts', id), 'Contact', id);
  }

  app.get(
    '/users/:user_id/contacts',
    {
      schema: {
        tags,
        summary: "Search a user's contacts",
        params: UserIdParams,
        querystring: searchQuery(FILTERS),
        response: { 200: envelopeSchema(Contact), ...errors },
      },
    },
    async (request) => {
      const user = requireReachableUser(request.principal, await findUser(db, request.params.user_id), request.params.user_id);
      const query = db.selectFrom('contacts').selectAll().where('user_id', '=', user.id).where('deleted_at', 'is', null);
      const page = await searchPage(query, FILTERS, request.query, request, config.publicUrl, 'id', (row) => row);
      return { ...page, data: await toApiContacts(db, user.id, page.data) };
    },
  );

  app.post(
    '/users/:user_id/contacts',
    {
      schema: {
        tags,
        summary: 'Create a contact (an email or a phone is required)',
        params: UserIdParams,
        body: ContactBody,
        response: { 201: Contact, ...errors },
      },
    },
    async (request, reply) => {
      const user = requireReachableUser(request.principal, await findUser(db, request.params.user_id), request.params.user_id);
      const { fields, tags: names = [] } = contactChanges(request.body);
      const contact = await insertContact(db, user.id, fields, names);
      return reply.code(201).header('Location', `${config.publicUrl}/v3/contacts/${contact.id}`).send(contact);
    },
  );

  app.get(
    '/contacts/:id',
    { schema: { tags, summary: 'Read a contact', params: IdParams, response: { 200: Contact, ...errors } } },
    async (request) => {
      const contact = await reachableContact(request.principal, request.params.id);
      return (await toApiContacts(db, contact.user_id, [contact]))[0];
    },
  );

  app.put(
    '/contacts/:id',
    {
      schema: {
        tags,
        summary: 'Update a contact (only the fields sent)',
        params: IdParams,
        body: ContactBody,
        response: { 200: Contact, ...errors },
      },
    },
    async (request) => {
      const contact = await reachableContact(request.principal, request.params.id);
      const { fields, tags: names } = contactChanges(request.body, contact);
      const updated = await updateContact(db, contact, fields, names);
      if (!updated) throw new HttpError('not_found', `Contact ${contact.id} does not exist.`);
      return updated;
    },
  );

  app.delete(
    '/contacts/:id',
    { schema: { tags, summary: 'Delete a contact', params: IdParams, response: { 200: Success, ...errors } } },
    async (request) => {
      await deleteContact(db, await reachableContact(request.principal, request.params.id));
      return { success: true };
    },
  );
}
