import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { findContact, searchContacts, toApiContacts } from '../../contacts/contacts.ts';
import { DEFAULT_PER_PAGE } from '../../db/search.ts';
import type { App } from '../../http/fastify-types.ts';
import { requireReachable } from '../../identity/access.ts';
import { repliesBefore } from '../../inbound/replies.ts';
import { Id } from '../../json-schema.ts';
import { deliveriesToContact } from '../../sending/deliveries.ts';
import { formatForUser, PAGE_SCHEMA, sendPage } from '../render.ts';
import { toSignIn } from '../viewer.ts';
import { outcomeWords, STATE_WORDS } from './message-reports.ts';
import { replyView } from './replies.ts';

/** The most deliveries and replies a contact's history shows. */
const HISTORY = 50;

const ListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 255 })),
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
});
const ContactParams = Type.Object({ id: Id });

/** A suppression in words, for the contact's page. */
function suppressionWords(s: { reason: string; at: string | null; description: string | null } | null, timeZone: string | null) {
  if (!s) return null;
  const when = s.at ? ` since ${formatForUser(new Date(s.at), timeZone)}` : '';
  return `${s.reason.replaceAll('_', ' ')}${when}${s.description ? `: ${s.description}` : ''}`;
}

/**
 * `/contacts`: the contacts of the user the pages are for, searched as the API's contact search
 * (the text matched against first name, last name, email and phone, OR-combined as its filters
 * are); `/contacts/{id}`: one contact's history — each message sent to them with its outcome,
 * their replies, their suppressions and tags. A contact is reachable under the API's rule.
 */
export async function contactPages(web: App, { database: { db } }: AppContext): Promise<void> {
  web.get('/contacts', { schema: { ...PAGE_SCHEMA, querystring: ListQuery } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const { q = '', page = 1 } = request.query;
    const text = q.trim();
    // A number is looked for among the phones only when the text is one (`(727) 555`), by its digits.
    const digits = /^[\d\s().+-]+$/.test(text) ? text.replace(/\D/g, '') : '';
    const filters = text ? { first_name: [text], last_name: [text], email: [text], ...(digits ? { phone: [digits] } : {}) } : {};
    const result = await searchContacts(db, viewer.owner.id, { page, per_page: DEFAULT_PER_PAGE, ...filters });
    const lastPage = Math.max(1, Math.ceil(result.total / result.perPage));
    const link = (n: number) => `/contacts?${new URLSearchParams({ q: text, page: String(n) }).toString()}`;
    return sendPage(reply, 'contacts/list', {
      title: 'Contacts',
      section: 'contacts',
      session: viewer.session,
      q: text,
      rows: result.rows,
      total: result.total,
      page: result.page,
      lastPage,
      prev: result.page > 1 ? link(result.page - 1) : null,
      next: result.page < lastPage ? link(result.page + 1) : null,
    });
  });

  web.get('/contacts/:id', { schema: { ...PAGE_SCHEMA, params: ContactParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const { row } = requireReachable(viewer.principal, await findContact(db, request.params.id), 'Contact', request.params.id);
    const timeZone = viewer.owner.time_zone;
    const [[contact], deliveries, replies] = await Promise.all([
      toApiContacts(db, row.user_id, [row]),
      deliveriesToContact(db, row.user_id, row.id, HISTORY),
      repliesBefore(db, row.user_id, { contactId: row.id, limit: HISTORY }),
    ]);
    return sendPage(reply, 'contacts/contact', {
      title: contact?.full_name || contact?.email || contact?.phone || `Contact ${row.id}`,
      section: 'contacts',
      session: viewer.session,
      contact,
      emailSuppression: suppressionWords(contact?.email_suppression ?? null, timeZone),
      phoneSuppression: suppressionWords(contact?.phone_suppression ?? null, timeZone),
      deliveries: deliveries.map((d) => ({
        href: `${d.message_kind === 'templated_email' ? '/emails' : '/drops'}/${d.message_id}`,
        label: `${d.message_kind === 'templated_email' ? 'Email' : 'Drop'} ${d.message_id}`,
        address: d.address,
        state: STATE_WORDS[d.state],
        outcome: outcomeWords(d.outcome, d.last_error),
        at: formatForUser(d.updated_at, timeZone),
      })),
      replies: replies.map((r) => replyView(r, timeZone)),
    });
  });
}
