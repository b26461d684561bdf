import { Type } from 'typebox';
import type { App, AppContext } from '../../app.ts';
import type { TemplatedEmailRow } from '../../db/schema.ts';
import { isBlankHtml, sanitizeEmailHtml } from '../../messaging/email-html.ts';
import { MESSAGE_STATUSES, planSchedule, SEND_TYPES, type SendType as SendTypeValue } from '../../messaging/lifecycle.ts';
import { type RecipientGroup, RecipientList, RecipientOutput, resolveRecipientEntries } from '../../messaging/recipients.ts';
import { findEmail, findEmailRows, renderEmailText, toApiTemplatedEmail } from '../../messaging/templated-emails.ts';
import { DEFAULT_GREETINGS, findTemplatedMessage } from '../../messaging/templated-messages.ts';
import { changesAny, parseSendAt, Reporting, SendAtField, SendType, StatusField, StatusOut } from '../message-fields.ts';
import { registerMessageRoutes } from '../message-routes.ts';
import { type FieldErrors, validationError } from '../problems.ts';
import { Id, Nullable, StringEnum, Timestamp, WritableBody } from '../schemas.ts';
import type { Filters } from '../search.ts';

const TemplatedEmail = Type.Object({
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
};
interface EmailBody {
  templated_message_id?: number | null;
  subject?: string;
  description?: string;
  greeting_with_first_name?: string;
  greeting_without_first_name?: string;
  body?: string;
  closing?: string;
  ps_line?: string;
  signature_id?: number | null;
  status?: string;
  send_type?: SendTypeValue;
  send_at?: string | null;
  recipients?: { group: RecipientGroup; value: number; label?: string }[];
  exclusions?: { group: RecipientGroup; value: number; label?: string }[] | null;
}
const TEXT_FIELDS = [
  'subject',
  'description',
  'greeting_with_first_name',
  'greeting_without_first_name',
  'body',
  'closing',
  'ps_line',
] as const;
const READ_ONLY = ['id', 'text', 'sending_at', 'sent_at', 'source', 'reporting', 'created_at', 'updated_at', 'deleted_at'];
const CONTENT_FIELDS = [...TEXT_FIELDS, 'templated_message_id', 'signature_id', 'recipients', 'exclusions'] as const;

const FILTERS: Filters = {
  id: { kind: 'id', column: 'msg.id' },
  templated_message_id: { kind: 'id', column: 'msg.templated_message_id' },
  subject: { kind: 'text', column: 'msg.subject' },
  description: { kind: 'text', column: 'msg.description' },
  signature_id: { kind: 'id', column: 'msg.signature_id' },
  status: { kind: 'enum', column: 'msg.status', values: MESSAGE_STATUSES },
  send_type: { kind: 'enum', column: 'msg.send_type', values: SEND_TYPES },
  source: { kind: 'enum', column: 'msg.source', values: ['API', 'Web'] },
};

/**
 * Checks a templated email against its owner's data, its template and the status rules, and
 * returns the columns to write, `text` re-rendered. One 400 reports every problem.
 */
async function emailChanges(ctx: AppContext, ownerId: number, input: Record<string, unknown>, current: TemplatedEmailRow | undefined) {
  const body = input as EmailBody;
  const { db } = ctx.database;
  const errors: FieldErrors = {};
  const changes: Record<string, unknown> = {};

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

  let signatureHtml: string | null | undefined;
  const signatureId = body.signature_id !== undefined ? body.signature_id : current?.signature_id;
  if (signatureId != null) {
    const signature = await db
      .selectFrom('signatures')
      .select('body')
      .where('user_id', '=', ownerId)
      .where('id', '=', signatureId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (!signature && body.signature_id !== undefined) errors.signature_id = ["does not name one of the owner's signatures"];
    signatureHtml = signature?.body ?? null;
  }
  if (body.signature_id !== undefined) changes.signature_id = body.signature_id;

  for (const field of ['recipients', 'exclusions'] as const) {
    const entries = body[field];
    if (entries != null) changes[field] = JSON.stringify(await resolveRecipientEntries(db, ownerId, field, entries, errors));
  }

  const comparable = { ...body, body: changes.body ?? body.body, exclusions: body.exclusions ?? undefined };
  const otherChanges = current !== undefined && changesAny(current, comparable, CONTENT_FIELDS);
  const requested = { status: body.status, send_type: body.send_type, send_at: parseSendAt(body.send_at) };
  const schedule = planSchedule(current, requested, otherChanges, ctx.clock, errors);
  if (Object.keys(errors).length > 0) throw validationError(errors);

  const merged = { ...current, ...changes } as TemplatedEmailRow;
  changes.text = renderEmailText(merged, signatureHtml ?? null);
  return { ...changes, ...schedule };
}

/** The specification's templated email endpoints: search, create, read, update, delete. */
export async function templatedEmailRoutes(app: App, ctx: AppContext): Promise<void> {
  await registerMessageRoutes<TemplatedEmailRow>(app, ctx, {
    kind: 'templated_email',
    collection: 'templated_emails',
    label: 'Templated email',
    tag: 'Templated emails',
    schema: TemplatedEmail,
    createBody: WritableBody(Type.Partial(Type.Object(fields)).properties, READ_ONLY),
    updateBody: WritableBody(Type.Partial(Type.Object(fields)).properties, READ_ONLY),
    filters: FILTERS,
    rowsByIds: (c, ids) => findEmailRows(c.database.db, ids),
    find: (c, id) => findEmail(c.database.db, id),
    toApi: (view) => toApiTemplatedEmail(view),
    changes: emailChanges,
  });
}
