import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { searchTags } from '../../contacts/tags.ts';
import type { Db } from '../../db/database.ts';
import { MAX_PER_PAGE } from '../../db/search.ts';
import { searchSignatures } from '../../email/signatures.ts';
import { createEmail, EmailBody, updateEmail } from '../../email/templated-emails.ts';
import { DEFAULT_GREETINGS } from '../../email/templated-messages.ts';
import { validationError } from '../../errors.ts';
import type { App } from '../../http/fastify-types.ts';
import { checkBody } from '../../http/validation.ts';
import { requireReachable } from '../../identity/access.ts';
import { Id } from '../../json-schema.ts';
import type { EmailView } from '../../messages/message-tables.ts';
import { emptyForm, type Form, formValues, submitForm } from '../forms.ts';
import { PAGE_SCHEMA, sendPage } from '../render.ts';
import { toSignIn, type Viewer } from '../viewer.ts';
import {
  type Action,
  checked,
  contactOptions,
  entries,
  isEditable,
  localInput,
  NOTICES,
  recipientIds,
  scheduleOf,
} from './compose-fields.ts';
import { EMAIL_PAGES } from './message-kinds.ts';

/**
 * `/emails/new` and `/emails/{id}/edit`: every field of a templated email with a label, the
 * recipients and exclusions as checkboxes (tags by name, contacts found by a search that re-renders
 * the form), Save, Schedule (in the user's time zone), Send now and Cancel. Each action builds the
 * body `POST`/`PUT /v3/…/templated_emails` take, checks it against the same schema and runs the
 * same domain function (`createEmail`, `updateEmail`): the errors are the API's.
 */
const EMAIL_LABELS = {
  subject: 'Subject',
  greeting_with_first_name: 'Greeting (with first name)',
  greeting_without_first_name: 'Greeting (without first name)',
  body: 'Body',
  closing: 'Closing',
  ps_line: 'P.S.',
  signature_id: 'Signature',
  recipients: 'Recipients',
  exclusions: 'Exclusions',
  send_at: 'Send at',
  status: 'Status',
  postal_address: 'Postal address',
} as const;
const TEXT = ['subject', 'greeting_with_first_name', 'greeting_without_first_name', 'body', 'closing', 'ps_line'] as const;
const FIELDS = [...TEXT, 'signature_id', 'send_at', 'contact_q', 'action'] as const;
const LISTS = ['recipients_tags', 'recipients_contacts', 'exclusions_tags', 'exclusions_contacts'] as const;

const EditParams = Type.Object({ id: Id });
const EditQuery = Type.Object({ done: Type.Optional(Type.String({ maxLength: 20 })) });

/** The form's values as posted: its text fields trimmed (the body kept as typed), its checkbox groups as lists. */
function postedValues(body: unknown): Record<string, string | string[]> {
  const values: Record<string, string | string[]> = formValues(body, FIELDS);
  const raw = (body ?? {}) as Record<string, unknown>;
  if (typeof raw.body === 'string') values.body = raw.body;
  for (const name of LISTS) values[name] = checked(raw[name]);
  return values;
}

function emailValues(view: EmailView | undefined, timeZone: string | null): Record<string, string | string[]> {
  if (!view) return { ...DEFAULT_GREETINGS, subject: '', body: '', closing: '', ps_line: '', signature_id: '', send_at: '' };
  const { row } = view;
  return {
    ...Object.fromEntries(TEXT.map((name) => [name, row[name] ?? ''])),
    signature_id: row.signature_id === null ? '' : String(row.signature_id),
    send_at: row.send_type === 'Future' && row.send_at ? localInput(row.send_at, timeZone) : '',
    ...recipientIds('recipients', row.recipients),
    ...recipientIds('exclusions', row.exclusions),
  };
}

/** The API's body for the action: the fields, the recipients, and the schedule the button asks for. */
function emailBody(values: Record<string, string | string[]>, action: Action, timeZone: string | null, view: EmailView | undefined) {
  const schedule = scheduleOf(action, String(values.send_at ?? ''), timeZone, view?.row.status);
  if (action === 'cancel') return schedule;
  const text = Object.fromEntries(TEXT.map((name) => [name, String(values[name] ?? '')]));
  const signature = String(values.signature_id ?? '');
  return {
    ...text,
    signature_id: /^\d{1,15}$/.test(signature) ? Number(signature) : null,
    recipients: entries(values, 'recipients'),
    exclusions: entries(values, 'exclusions'),
    ...schedule,
  };
}

async function emailChoices(db: Db, ownerId: number, values: Record<string, string | string[]>, search: string) {
  const [tags, signatures, contacts] = await Promise.all([
    searchTags(db, ownerId, { per_page: MAX_PER_PAGE }),
    searchSignatures(db, ownerId, { per_page: MAX_PER_PAGE }),
    contactOptions(db, ownerId, values, search),
  ]);
  return {
    tags: tags.rows.map((tag) => ({ value: String(tag.id), label: tag.name })),
    signatures: signatures.rows.map((s) => ({ value: String(s.id), label: s.name })),
    contacts,
  };
}

async function sendEmailForm(
  reply: FastifyReply,
  ctx: AppContext,
  viewer: Viewer,
  o: { view?: EmailView; form: Form; search?: string; notice?: string },
  status = 200,
) {
  const { db } = ctx.database;
  const { view, form } = o;
  const choices = await emailChoices(db, viewer.owner.id, form.values, o.search ?? '');
  const title = view ? `Edit “${view.row.subject}”` : 'New email';
  return sendPage(
    reply,
    'compose/email',
    {
      title,
      section: 'emails',
      session: viewer.session,
      form,
      view: view ?? null,
      editable: !view || isEditable(view.row.status),
      action: view ? `/emails/${view.row.id}/edit` : '/emails/new',
      timeZone: viewer.owner.time_zone ?? 'UTC',
      search: o.search ?? '',
      searched: o.search !== undefined && o.search !== '',
      notice: o.notice ?? null,
      ...choices,
    },
    status,
  );
}

/** Runs the posted action and answers with a redirect, the refused form (422) or the form re-rendered by a contact search. */
async function postEmail(reply: FastifyReply, ctx: AppContext, viewer: Viewer, body: unknown, view: EmailView | undefined) {
  const values = postedValues(body);
  const action = String(values.action) as Action;
  if (action === 'search') return sendEmailForm(reply, ctx, viewer, { view, form: emptyForm(values), search: String(values.contact_q) });
  if (!['save', 'schedule', 'send', 'cancel'].includes(action)) throw validationError({ action: ['must be one of the form’s buttons'] });
  const timeZone = viewer.owner.time_zone;
  const outcome = await submitForm(values, EMAIL_LABELS, async () => {
    const apiBody = emailBody(values, action, timeZone, view);
    checkBody(EmailBody, apiBody);
    return view ? updateEmail(ctx, view, apiBody) : createEmail(ctx, viewer.owner, apiBody);
  });
  if (!outcome.ok) return sendEmailForm(reply, ctx, viewer, { view, form: outcome.form }, 422);
  const id = outcome.result.row.id;
  return reply.redirect(action === 'save' ? `/emails/${id}/edit?done=saved` : `/emails/${id}?done=${action}`, 303);
}

export async function composePages(web: App, ctx: AppContext): Promise<void> {
  const { db } = ctx.database;
  const found = async (viewer: Viewer, id: number) =>
    requireReachable(viewer.principal, await EMAIL_PAGES.find(db, id), 'Templated email', id);

  web.get('/emails/new', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    return sendEmailForm(reply, ctx, viewer, { form: emptyForm(emailValues(undefined, null)) });
  });
  web.post('/emails/new', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    return postEmail(reply, ctx, viewer, request.body, undefined);
  });
  web.get('/emails/:id/edit', { schema: { ...PAGE_SCHEMA, params: EditParams, querystring: EditQuery } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const view = await found(viewer, request.params.id);
    const form = emptyForm(emailValues(view, viewer.owner.time_zone));
    return sendEmailForm(reply, ctx, viewer, { view, form, notice: NOTICES[request.query.done ?? ''] });
  });
  web.post('/emails/:id/edit', { schema: { ...PAGE_SCHEMA, params: EditParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    return postEmail(reply, ctx, viewer, request.body, await found(viewer, request.params.id));
  });
}
