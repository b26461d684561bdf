import type { Insertable } from 'kysely';
import { type Static, Type } from 'typebox';
import type { AppContext } from '../app-context.ts';
import type { Db } from '../db/database.ts';
import type { UserRef } from '../db/owned-rows.ts';
import type { TemplatedEmailRow, TemplatedEmailsTable } from '../db/schema.ts';
import type { CountCache, Filters, SearchParams } from '../db/search.ts';
import { type FieldErrors, notFound, throwIfAny } from '../errors.ts';
import { findSenderFields } from '../identity/users.ts';
import { Id, Nullable, StringEnum, Timestamp, WritableBody } from '../json-schema.ts';
import { MESSAGE_STATUSES, planSchedule, SEND_TYPES } from '../messages/lifecycle.ts';
import {
  CorrelationFields,
  changesAny,
  correlationChanges,
  ExternalIdOut,
  MetadataOut,
  parseSendAt,
  Reporting,
  SendAtField,
  SendType,
  StatusField,
  StatusOut,
} from '../messages/message-fields.ts';
import { type EmailView, findEmail, insertEmail, pageOfEmails } from '../messages/message-tables.ts';
import { createMessage, deleteMessage, externalIdTaken, updateMessage } from '../messages/message-writes.ts';
import { RecipientList, RecipientOutput, resolveRecipientEntries } from '../messages/recipients.ts';
import { formatTimestamp } from '../time.ts';
import { isBlankHtml, sanitizeEmailHtml } from './email-html.ts';
import { renderEmailText } from './email-text.ts';
import { findSignatureBody } from './signatures.ts';
import { DEFAULT_GREETINGS, findTemplatedMessage } from './templated-messages.ts';

/**
 * Templated emails (the specification's second resource): the API shape and bodies, the rules a
 * templated email's fields follow, and every statement that reads or writes one. The routes are
 * in http/routes/templated-emails.ts; sending one is the engine's (sending/) with the email
 * channel (email-channel.ts).
 */

// ── Shapes ──────────────────────────────────────────────────────────────────────────────────

export const TemplatedEmail = Type.Object({
  id: Id,
  templated_message_id: Nullable(Type.Integer()),
  subject: Type.String(),
  description: Type.String(),
  greeting_with_first_name: Type.String(),
  greeting_without_first_name: Type.String(),
  body: Type.String({ description: 'Email HTML, sanitised on save' }),
  closing: Type.String(),
  ps_line: Type.String(),
  text: Type.String({ description: 'Plain text of greeting, body, closing, signature and P.S.' }),
  signature_id: Nullable(Type.Integer()),
  status: StatusOut,
  send_type: SendType,
  send_at: Nullable(Timestamp),
  sending_at: Nullable(Timestamp),
  sent_at: Nullable(Timestamp),
  recipients: Type.Array(RecipientOutput),
  exclusions: Type.Null({ description: 'Accepted on input and applied; always null in responses' }),
  source: StringEnum(['API', 'Web'] as const),
  reporting: Reporting,
  external_id: ExternalIdOut,
  metadata: MetadataOut,
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
});

const MAX_BODY = 256 * 1024;
const fields = {
  templated_message_id: Nullable(Id),
  subject: Type.String({ minLength: 1, maxLength: 998, description: 'Merge tags {{first_name}}, {{last_name}}, {{full_name}} work here' }),
  description: Type.String({ maxLength: 4096 }),
  greeting_with_first_name: Type.String({ maxLength: 255 }),
  greeting_without_first_name: Type.String({ maxLength: 255 }),
  body: Type.String({
    minLength: 1,
    maxLength: MAX_BODY,
    description: 'Email HTML: scripts, event handlers, forms and frames are removed',
  }),
  closing: Type.String({ maxLength: 1024 }),
  ps_line: Type.String({ maxLength: 1024 }),
  signature_id: Nullable(Id),
  status: StatusField,
  send_type: SendType,
  send_at: SendAtField,
  recipients: RecipientList,
  // null is what a read shows, so a client can PUT back what it read: it leaves exclusions as they are.
  exclusions: Nullable(RecipientList),
  ...CorrelationFields,
};
const READ_ONLY = ['id', 'text', 'sending_at', 'sent_at', 'source', 'reporting', 'created_at', 'updated_at', 'deleted_at'];
/** Nothing is required on its own: a library template may supply the subject and body. */
export const EmailBody = WritableBody(Type.Partial(Type.Object(fields)).properties, READ_ONLY);
type EmailInput = Static<typeof EmailBody>;

const TEXT_FIELDS = [
  'subject',
  'description',
  'greeting_with_first_name',
  'greeting_without_first_name',
  'body',
  'closing',
  'ps_line',
] as const;
const CONTENT_FIELDS = [...TEXT_FIELDS, 'templated_message_id', 'signature_id', 'recipients', 'exclusions'] as const;

export const EMAIL_FILTERS: Filters = {
  id: { kind: 'id', column: 'msg.id' },
  templated_message_id: { kind: 'id', column: 'msg.templated_message_id' },
  subject: { kind: 'text', column: 'msg.subject' },
  description: { kind: 'text', column: 'msg.description' },
  signature_id: { kind: 'id', column: 'msg.signature_id' },
  status: { kind: 'enum', column: 'msg.status', values: MESSAGE_STATUSES },
  send_type: { kind: 'enum', column: 'msg.send_type', values: SEND_TYPES },
  external_id: { kind: 'exact', column: 'msg.external_id' },
  source: { kind: 'enum', column: 'msg.source', values: ['API', 'Web'] },
};

/** The API shape of a templated email (the specification's table): the one place they become JSON. */
export function toApiTemplatedEmail(view: EmailView) {
  const { row } = view;
  return {
    id: row.id,
    templated_message_id: row.templated_message_id,
    subject: row.subject,
    description: row.description,
    greeting_with_first_name: row.greeting_with_first_name,
    greeting_without_first_name: row.greeting_without_first_name,
    body: row.body,
    closing: row.closing,
    ps_line: row.ps_line,
    text: row.text,
    signature_id: row.signature_id,
    status: row.status,
    send_type: row.send_type,
    send_at: formatTimestamp(row.send_at),
    sending_at: formatTimestamp(row.sending_at),
    sent_at: formatTimestamp(row.sent_at),
    recipients: row.recipients,
    // Accepted and applied, but never shown: the specification's responses carry null.
    exclusions: null,
    source: row.source,
    reporting: view.reporting,
    external_id: row.external_id ?? null,
    metadata: row.metadata ?? {},
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatTimestamp(row.deleted_at),
  };
}

// ── Rules ───────────────────────────────────────────────────────────────────────────────────

/**
 * Checks a templated email against its owner's data, its template and the status rules, and
 * returns the columns to write, `text` re-rendered. One validation error reports every problem.
 */
async function emailChanges(ctx: AppContext, ownerId: number, body: EmailInput, current: TemplatedEmailRow | undefined) {
  const { db } = ctx.database;
  const errors: FieldErrors = {};
  const changes: Partial<Insertable<TemplatedEmailsTable>> = {};

  // Fields left out on create are copied from the library template.
  const fromTemplate: Partial<Record<(typeof TEXT_FIELDS)[number], string>> = {};
  if (body.templated_message_id != null) {
    const template = await findTemplatedMessage(db, body.templated_message_id);
    if (!template) errors.templated_message_id = ['does not name a template of the library'];
    else if (!current) for (const field of TEXT_FIELDS) fromTemplate[field] = template[field] ?? '';
  }
  if (body.templated_message_id !== undefined) changes.templated_message_id = body.templated_message_id;

  for (const field of TEXT_FIELDS) {
    const value = body[field] ?? (current ? undefined : fromTemplate[field]);
    if (value !== undefined) changes[field] = field === 'body' ? sanitizeEmailHtml(value) : value;
  }
  if (!current) {
    changes.greeting_with_first_name ??= DEFAULT_GREETINGS.greeting_with_first_name;
    changes.greeting_without_first_name ??= DEFAULT_GREETINGS.greeting_without_first_name;
    for (const field of ['description', 'closing', 'ps_line'] as const) changes[field] ??= '';
    if (changes.subject === undefined) errors.subject = ['is required (or give a templated_message_id that supplies it)'];
    if (changes.body === undefined) errors.body = ['is required (or give a templated_message_id that supplies it)'];
  }
  if (typeof changes.subject === 'string') {
    // The subject becomes a mail header: a line break would start a header of the caller's choosing.
    if (/[\r\n]/.test(changes.subject)) errors.subject = ['must be a single line'];
    else if (changes.subject.trim() === '') errors.subject = ['must not be blank'];
  }
  if (typeof changes.body === 'string' && isBlankHtml(changes.body))
    errors.body = ['must contain text or an image once unsafe markup is removed'];

  let signatureHtml: string | null = null;
  const signatureId = body.signature_id !== undefined ? body.signature_id : current?.signature_id;
  if (signatureId != null) {
    signatureHtml = (await findSignatureBody(db, ownerId, signatureId)) ?? null;
    if (signatureHtml === null && body.signature_id !== undefined) errors.signature_id = ["does not name one of the owner's signatures"];
  }
  if (body.signature_id !== undefined) changes.signature_id = body.signature_id;

  for (const field of ['recipients', 'exclusions'] as const) {
    const entries = body[field];
    if (entries != null) changes[field] = JSON.stringify(await resolveRecipientEntries(db, ownerId, field, entries, errors));
  }

  Object.assign(changes, correlationChanges(body, errors));
  const comparable = { ...body, body: changes.body ?? body.body, exclusions: body.exclusions ?? undefined };
  const otherChanges = current !== undefined && changesAny(current, comparable, CONTENT_FIELDS);
  const requested = { status: body.status, send_type: body.send_type, send_at: parseSendAt(body.send_at) };
  const schedule = planSchedule(current, requested, otherChanges, ctx.clock, errors);
  if (schedule.status === 'Scheduled' && current?.status !== 'Scheduled' && ctx.config.smtpUrl && !ctx.config.mailPostalAddress) {
    // CAN-SPAM: commercial email shows a physical address; real mail does not leave without one.
    const owner = await findSenderFields(db, ownerId);
    if (!owner?.postal_address) {
      errors.postal_address = [
        `is required to send email, and the owner has none: set it with PUT /v3/users/${ownerId} {"postal_address": "…"} (or the operator sets MAIL_POSTAL_ADDRESS)`,
      ];
    }
  }
  throwIfAny(errors);

  const merged = { ...current, ...changes } as TemplatedEmailRow;
  changes.text = renderEmailText(merged, signatureHtml);
  return { ...changes, ...schedule };
}

// ── Statements ──────────────────────────────────────────────────────────────────────────────

async function requireEmail(db: Db, id: number): Promise<EmailView> {
  const view = await findEmail(db, id);
  if (!view) throw notFound('Templated email', id);
  return view;
}

/** One page of an owner's templated emails, filtered by `EMAIL_FILTERS`. */
export function searchEmails(db: Db, ownerId: number, params: SearchParams, totals: CountCache) {
  return pageOfEmails(db, ownerId, params, EMAIL_FILTERS, totals);
}

export async function createEmail(ctx: AppContext, owner: UserRef, body: EmailInput): Promise<EmailView> {
  const values = await emailChanges(ctx, owner.id, body, undefined);
  const now = ctx.clock();
  const row = { ...values, user_id: owner.id, created_at: now, updated_at: now } as Insertable<TemplatedEmailsTable>;
  return externalIdTaken(ctx, 'templated_email', owner.id, values.external_id, () =>
    createMessage(ctx, 'templated_email', owner, values, (db) => insertEmail(db, row)),
  );
}

/** Applies the fields present (README, "API conventions": PUT is a partial update), under the status rules. */
export async function updateEmail(ctx: AppContext, view: EmailView, body: EmailInput): Promise<EmailView> {
  return externalIdTaken(ctx, 'templated_email', view.row.user_id, body.external_id, () =>
    updateMessage(
      ctx,
      'templated_email',
      view,
      (id) => requireEmail(ctx.database.db, id),
      (row) => emailChanges(ctx, row.user_id, body, row),
    ),
  );
}

export async function deleteEmail(ctx: AppContext, view: EmailView): Promise<void> {
  await deleteMessage(ctx, 'templated_email', view.row, (id) => requireEmail(ctx.database.db, id));
}
