import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { liftSuppressions, type SuppressedContact, suppressedContactsAfter } from '../../contacts/contacts.ts';
import type { Suppression } from '../../db/schema.ts';
import { validationError } from '../../errors.ts';
import type { App } from '../../http/fastify-types.ts';
import { findDeliveryFacts } from '../../sending/deliveries.ts';
import { formatForUser, PAGE_SCHEMA, sendPage } from '../render.ts';
import { toSignIn, type Viewer } from '../viewer.ts';

const PER_PAGE = 50;
/** The most suppressions one confirmation lifts (the API's `contact_ids` takes 1,000). */
const MOST_SELECTED = 1_000;

/** A suppression's reason in words (docs/outcomes.md); an unknown one reads as its name. */
const REASON_WORDS: Record<string, string> = {
  hard_bounce: 'Hard bounce',
  repeated_soft_bounce: 'Repeated soft bounces',
  invalid_address: 'Invalid address',
  complaint: 'Spam complaint',
  unsubscribed: 'Unsubscribed',
  landline: 'Landline',
  dnc: 'Do-not-call list',
  do_not_call: 'Do-not-call list',
};

function reasonWords(reason: string): string {
  const words = reason.replaceAll('_', ' ');
  return REASON_WORDS[reason] ?? `${words[0]?.toUpperCase() ?? ''}${words.slice(1)}`;
}

/** Why a suppression cannot be lifted here, or null when it can. */
function whyNotLiftable(channel: 'email' | 'phone', contact: SuppressedContact): string | null {
  if (channel === 'phone' || contact.email_liftable) return null;
  return contact.email_suppression?.reason === 'complaint'
    ? 'The person reported the email as spam: only their own word lifts it.'
    : 'The person unsubscribed: only their own word lifts it (by subscribing again).';
}

const ListQuery = Type.Object({
  after: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
  lifted: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
});

/**
 * `/suppressions`: the addresses and numbers of the user the pages are for that no longer receive,
 * with why (the reason, when, the deciding message, the server's words), paged by keys; lifting
 * one or those selected goes through a confirmation page and `liftSuppressions`, the API's own
 * lift, which refuses an unsubscribe or a complaint (the person's own word).
 */
export async function suppressionPages(web: App, ctx: AppContext): Promise<void> {
  const { db } = ctx.database;

  web.get('/suppressions', { schema: { ...PAGE_SCHEMA, querystring: ListQuery } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const { after = 0, lifted } = request.query;
    const found = await suppressedContactsAfter(db, viewer.owner.id, after, PER_PAGE + 1);
    const shown = found.slice(0, PER_PAGE);
    return sendPage(reply, 'suppressions/list', {
      title: 'Suppressions',
      section: 'suppressions',
      session: viewer.session,
      rows: await suppressionRows(ctx, viewer, shown),
      lifted: lifted ?? null,
      first: after > 0 ? '/suppressions' : null,
      next: found.length > PER_PAGE ? `/suppressions?after=${shown.at(-1)?.id}` : null,
    });
  });

  // The confirmation: a GET that changes nothing, so the list's form works without script.
  web.get('/suppressions/lift', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const selected = selection(request);
    const ids = [...new Set(selected.map((s) => s.id))].sort((a, b) => a - b);
    const contacts = ids.length === 0 ? [] : await suppressedContactsAfter(db, viewer.owner.id, 0, MOST_SELECTED, ids);
    const rows = (await suppressionRows(ctx, viewer, contacts)).filter((row) =>
      selected.some((s) => s.id === row.contactId && s.channel === row.channel),
    );
    return sendPage(reply, 'suppressions/confirm', {
      title: 'Lift suppressions?',
      section: 'suppressions',
      session: viewer.session,
      liftable: rows.filter((row) => !row.refusal),
      refused: rows.filter((row) => row.refusal),
    });
  });

  web.post('/suppressions/lift', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const selected = selection(request);
    const now = ctx.clock();
    let lifted = 0;
    for (const channel of ['email', 'phone'] as const) {
      const contactIds = [...new Set(selected.filter((s) => s.channel === channel).map((s) => s.id))];
      // The API's lift: only what it allows moves (an unsubscribe or a complaint never does).
      if (contactIds.length > 0) lifted += await liftSuppressions(db, viewer.owner.id, { channel, contact_ids: contactIds }, now);
    }
    return reply.redirect(`/suppressions?lifted=${lifted}`, 303);
  });
}

/** The `selected` values of a query or form (`email:12`, `phone:12`): 400 for anything else. */
function selection(request: FastifyRequest): { channel: 'email' | 'phone'; id: number }[] {
  const source = (request.method === 'POST' ? request.body : request.query) as Record<string, unknown> | undefined;
  const raw = source?.selected;
  const values = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  if (values.length === 0) throw validationError({ selected: ['must name at least one suppression to lift'] });
  if (values.length > MOST_SELECTED) throw validationError({ selected: [`must name at most ${MOST_SELECTED} suppressions`] });
  return values.map((value) => {
    const match = typeof value === 'string' ? /^(email|phone):([1-9]\d{0,15})$/.exec(value) : null;
    if (!match || !Number.isSafeInteger(Number(match[2]))) throw validationError({ selected: ['must be a suppression of the list'] });
    return { channel: match[1] as 'email' | 'phone', id: Number(match[2]) };
  });
}

interface SuppressionRow {
  key: string;
  contactId: number;
  channel: 'email' | 'phone';
  address: string;
  name: string;
  reason: string;
  at: string;
  words: string;
  message: { href: string; label: string } | null;
  refusal: string | null;
}

/** Each suppression of each contact as a row: an email and a phone suppression are two. */
async function suppressionRows(ctx: AppContext, viewer: Viewer, contacts: readonly SuppressedContact[]): Promise<SuppressionRow[]> {
  const deliveryIds = contacts
    .flatMap((c) => [c.email_suppression?.delivery_id, c.phone_suppression?.delivery_id])
    .filter((id) => id != null);
  const facts = new Map((await findDeliveryFacts(ctx.database.db, deliveryIds)).map((f) => [f.id, f]));
  const timeZone = viewer.owner.time_zone;
  const row = (contact: SuppressedContact, channel: 'email' | 'phone', s: Suppression): SuppressionRow => {
    const delivery = s.delivery_id === null ? undefined : facts.get(s.delivery_id);
    const path = delivery?.message_kind === 'templated_email' ? '/emails' : '/drops';
    return {
      key: `${channel}:${contact.id}`,
      contactId: contact.id,
      channel,
      address: (channel === 'email' ? contact.email : contact.phone) ?? '',
      name: [contact.first_name, contact.last_name].filter(Boolean).join(' '),
      reason: reasonWords(s.reason),
      at: s.at ? formatForUser(new Date(s.at), timeZone) : 'Before suppressions were recorded',
      words: s.description ?? '',
      message: delivery
        ? { href: `${path}/${delivery.message_id}`, label: `${path === '/emails' ? 'Email' : 'Drop'} ${delivery.message_id}` }
        : null,
      refusal: whyNotLiftable(channel, contact),
    };
  };
  return contacts.flatMap((c) => [
    ...(c.email_suppression ? [row(c, 'email', c.email_suppression)] : []),
    ...(c.phone_suppression ? [row(c, 'phone', c.phone_suppression)] : []),
  ]);
}
