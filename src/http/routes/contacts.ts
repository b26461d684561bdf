import {
  CONTACT_FILTERS,
  Contact,
  ContactBody,
  createContact,
  deleteContact,
  findContact,
  LiftBody,
  LiftResult,
  liftSuppressions,
  searchContacts,
  toApiContacts,
  updateContact,
} from '../../contacts/contacts.ts';
import { notFound } from '../../errors.ts';
import { type Principal, requireReachable } from '../../identity/access.ts';
import { Success } from '../../json-schema.ts';
import { created } from '../created.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { envelope, envelopeSchema, searchQuery } from '../paging.ts';
import { AUTHENTICATED_ERRORS, IdParams, problems, UserIdParams } from '../schemas.ts';

/** Contacts: reachable through their owner, as every owned resource (identity/access.ts). */
export const contactRoutes: RoutePlugin = async (app, { database: { db }, config, clock }) => {
  const tags = ['Contacts'];
  const errors = problems(...AUTHENTICATED_ERRORS);
  const writeErrors = problems(...AUTHENTICATED_ERRORS, 409);
  const reachableContact = async (principal: Principal, id: number) =>
    requireReachable(principal, await findContact(db, id), 'Contact', id).row;

  app.get(
    '/users/:user_id/contacts',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: "Search a user's contacts",
        params: UserIdParams,
        querystring: searchQuery(CONTACT_FILTERS),
        response: { 200: envelopeSchema(Contact), ...errors },
      },
    },
    async (request) => envelope(await searchContacts(db, request.owner.id, request.query), (contact) => contact, request, config.publicUrl),
  );

  app.post(
    '/users/:user_id/contacts',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: 'Create a contact (an email or a phone is required)',
        params: UserIdParams,
        body: ContactBody,
        response: { 201: Contact, ...writeErrors },
      },
    },
    async (request, reply) => {
      const contact = await createContact(db, request.owner.id, request.body, clock());
      return created(reply, `${config.publicUrl}/v3/contacts/${contact.id}`, contact);
    },
  );

  app.post(
    '/users/:user_id/suppressions/lift',
    {
      config: { owner: 'user_id' },
      schema: {
        tags,
        summary: 'Let suppressed contacts receive again, in bulk',
        description:
          "Email addresses judged dead or failing (hard bounces, repeated soft bounces, invalid addresses) become Subscribed again; phone numbers suppressed by a voicemail outcome (a landline, a DNC hit, …) are called again. Filtered by reason, by when the suppression was decided and by contact. Unsubscribes and complaints are the person's own word and cannot be lifted. See docs/outcomes.md.",
        params: UserIdParams,
        body: LiftBody,
        response: { 200: LiftResult, ...errors },
      },
    },
    async (request) => ({ lifted: await liftSuppressions(db, request.owner.id, request.body, clock()) }),
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
        response: { 200: Contact, ...writeErrors },
      },
    },
    async (request) => {
      const contact = await reachableContact(request.principal, request.params.id);
      const updated = await updateContact(db, contact, request.body, clock());
      if (!updated) throw notFound('Contact', contact.id);
      return updated;
    },
  );

  app.delete(
    '/contacts/:id',
    { schema: { tags, summary: 'Delete a contact', params: IdParams, response: { 200: Success, ...errors } } },
    async (request) => {
      await deleteContact(db, await reachableContact(request.principal, request.params.id), clock());
      return { success: true };
    },
  );
};
