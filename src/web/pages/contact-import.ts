import multipart from '@fastify/multipart';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { ContactBody } from '../../contacts/contacts.ts';
import { MAX_IMPORT_BYTES } from '../../contacts/import.ts';
import {
  COLUMN_CHOICES,
  type ColumnChoice,
  chooseColumns,
  findImport,
  importPreview,
  importProgress,
  recentImports,
  runImport,
  stageImport,
  startImport,
} from '../../contacts/import-runs.ts';
import type { RefusedImportRow } from '../../db/schema.ts';
import { DomainError } from '../../errors.ts';
import type { App } from '../../http/fastify-types.ts';
import { bodyErrors } from '../../http/validation.ts';
import { requireReachable } from '../../identity/access.ts';
import { Id } from '../../json-schema.ts';
import { CSRF_FIELD, tokensMatch } from '../csrf.ts';
import { emptyForm, type Form, submitForm } from '../forms.ts';
import { formatForUser, PAGE_SCHEMA, sendMessage, sendPage } from '../render.ts';
import { refuseCancelled } from '../sessions.ts';
import { toSignIn, type Viewer } from '../viewer.ts';
import { csvField } from './message-reports.ts';

/**
 * `/contacts/import`: a CSV of contacts imported in the browser, in the steps of
 * contacts/import-runs.ts — the upload (a multipart form whose CSRF token is its first part,
 * checked before the file is read), the preview of the column mapping with a select per column,
 * Import, then the import's page: its progress (refreshed by a meta refresh, no script) and at the
 * end its counts and the rows refused with why. Each POST answers with a redirect; a refused form
 * with the form and its errors (422). An import is the owner's the pages are for (acting for a
 * teammate imports into theirs), and its page is reached under the API's access rule.
 */
const FIELD_WORDS: Record<string, string> = {
  first_name: 'First name',
  last_name: 'Last name',
  email: 'Email',
  phone: 'Phone',
  time_zone: 'Time zone',
  status: 'Status',
  tags: 'Tags',
  ignore: 'Not imported',
  row: 'Row',
};
/** Extensions of the files the page takes: what Google, Outlook, Apple and spreadsheets export. */
const CSV_NAME = /\.(csv|tsv|txt)$/i;
/** Seconds between two refreshes of a running import's page. */
const REFRESH_SECONDS = 2;
const RECENT = 10;
/** The refused rows a finished import's page lists; its CSV has them all. */
const REFUSED_SHOWN = 200;

const ImportParams = Type.Object({ id: Id });

/** What a cancelled account may still do here (sessions.ts, refuseCancelled). */
const CANCELLED_MAY = 'read its imports, not import contacts';

const fieldWords = (field: string) => FIELD_WORDS[field.split('.')[0] ?? ''] ?? field;

/** Why the columns cannot be imported, in the API's words less its hints at its `column` parameter. */
function columnsMessage(message: string): string {
  const why = message
    .replace(/; map them with \?column=NAME:field$/, '')
    .replace(/ \(name each field once, or map one of them with \?column=NAME:ignore\)$/, '');
  return `The columns cannot be imported as mapped: ${why}. Choose the field of each column below.`;
}

/** A refused row in words: its line, the field's name, the value there and the API's message as a sentence. */
function refusedWords(r: RefusedImportRow) {
  const label = fieldWords(r.field);
  return { line: r.line, label, value: r.value, why: `${label} ${r.message}.` };
}

async function foundImport(ctx: AppContext, viewer: Viewer, id: number) {
  return requireReachable(viewer.principal, await findImport(ctx.database.db, id), 'Contact import', id).row;
}

/** A multipart upload's file ('missing' without one); null for a form whose first part is not its token. */
async function readUpload(request: FastifyRequest, csrf: string | undefined): Promise<{ name: string; bytes: Buffer } | 'missing' | null> {
  let first = true;
  let file: { name: string; bytes: Buffer } | undefined;
  for await (const part of request.parts()) {
    if (first && (part.type === 'file' || part.fieldname !== CSRF_FIELD || !tokensMatch(part.value, csrf))) {
      if (part.type === 'file') part.file.resume();
      return null;
    }
    first = false;
    if (part.type !== 'file') continue;
    if (part.fieldname !== 'file' || file || !part.filename) part.file.resume();
    else file = { name: part.filename, bytes: await part.toBuffer() };
  }
  if (first) return null;
  return file ?? 'missing';
}

/**
 * The upload kept for its preview: its import's id; or why it cannot be (GOV.UK's words for a file
 * upload, the API's for a file it cannot read); null for a form without its token.
 */
async function stageUpload(ctx: AppContext, viewer: Viewer, request: FastifyRequest): Promise<number | string | null> {
  let upload: Awaited<ReturnType<typeof readUpload>>;
  try {
    upload = await readUpload(request, viewer.session.csrfToken);
  } catch (error) {
    const code = (error as { code?: string }).code ?? '';
    if (code === 'FST_REQ_FILE_TOO_LARGE') return `The selected file must be smaller than ${MAX_IMPORT_BYTES / 1024 / 1024} MB.`;
    if (code.startsWith('FST_')) return 'The selected file could not be read: send the form with one file.';
    throw error;
  }
  if (upload === null) return null;
  if (upload === 'missing') return 'Select a CSV file.';
  if (!CSV_NAME.test(upload.name)) return 'The selected file must be a CSV.';
  if (upload.bytes.length === 0) return 'The selected file is empty.';
  try {
    return await stageImport(ctx.database.db, viewer.owner.id, upload.name.slice(0, 255), upload.bytes, ctx.clock());
  } catch (error) {
    if (error instanceof DomainError && !error.errors) return error.message;
    throw error;
  }
}

async function sendUploadForm(reply: FastifyReply, ctx: AppContext, viewer: Viewer, form: Form, status = 200) {
  const recent = await recentImports(ctx.database.db, viewer.owner.id, RECENT);
  return sendPage(
    reply,
    'contacts/import-upload',
    {
      title: 'Import contacts',
      section: 'contacts',
      session: viewer.session,
      form,
      maxMegabytes: MAX_IMPORT_BYTES / 1024 / 1024,
      cancelled: viewer.session.user.status === 'Cancelled' ? `A cancelled account can ${CANCELLED_MAY}.` : null,
      recent: recent.map((r) => ({ ...r, at: formatForUser(r.created_at, viewer.owner.time_zone) })),
    },
    status,
  );
}

async function sendImportPage(reply: FastifyReply, ctx: AppContext, viewer: Viewer, id: number, form: Form, status = 200) {
  const row = await foundImport(ctx, viewer, id);
  const preview = importPreview(row);
  const progress = importProgress(row, ctx.clock());
  const errors = [...form.errors, ...preview.errors.map((message) => ({ field: 'columns', message: columnsMessage(message) }))];
  const mapped = COLUMN_CHOICES.filter((f) => f !== 'ignore' && preview.columns.some((c) => c.field === f));
  return sendPage(
    reply,
    'contacts/import',
    {
      title: row.state === 'staged' ? `Preview of ${row.file_name}` : `Import of ${row.file_name}`,
      section: 'contacts',
      session: viewer.session,
      row,
      form: { ...form, errors: row.state === 'staged' ? errors : form.errors },
      preview,
      progress,
      refresh: row.state === 'importing' && !progress.stalled ? REFRESH_SECONDS : null,
      mapped: mapped.map((field) => ({ field, label: fieldWords(field) })),
      choices: COLUMN_CHOICES.map((value) => ({ value, label: fieldWords(value) })),
      separator: { ',': 'commas', ';': 'semicolons', '\t': 'tabs' }[row.separator] ?? row.separator,
      refused: (row.refused ?? []).slice(0, REFUSED_SHOWN).map(refusedWords),
      refusedRows: new Set((row.refused ?? []).map((r) => r.line)).size,
      refusedReasons: row.refused?.length ?? 0,
      at: formatForUser(row.updated_at, viewer.owner.time_zone),
    },
    status,
  );
}

/** The mapping form's choice for each column (`column_0`, …), as far as the form has them. */
function postedChoices(body: unknown, columns: number): ColumnChoice[] {
  const values = (body ?? {}) as Record<string, unknown>;
  return Array.from({ length: columns }, (_, i) => {
    const value = values[`column_${i}`];
    return COLUMN_CHOICES.includes(value as ColumnChoice) ? (value as ColumnChoice) : 'ignore';
  });
}

/** `POST /contacts/import/{id}`: the columns chosen, then the preview again or the import started. */
async function postImport(request: FastifyRequest, reply: FastifyReply, ctx: AppContext, viewer: Viewer, id: number) {
  const { db } = ctx.database;
  const row = await foundImport(ctx, viewer, id);
  refuseCancelled(viewer.session, CANCELLED_MAY);
  const action = (request.body as Record<string, unknown> | undefined)?.action;
  if (row.state === 'staged') {
    const outcome = await submitForm({}, { columns: 'The column mapping' }, () =>
      chooseColumns(db, row, postedChoices(request.body, row.header.length), ctx.clock()),
    );
    if (!outcome.ok) return sendImportPage(reply, ctx, viewer, id, outcome.form, 422);
  }
  if (action === 'import') {
    const current = (await findImport(db, id))?.row ?? row;
    const outcome = await submitForm({}, { columns: 'The column mapping' }, () => startImport(db, current, ctx.clock()));
    if (!outcome.ok) return sendImportPage(reply, ctx, viewer, id, outcome.form, 422);
    if (outcome.result) {
      const check = (body: Record<string, unknown>) => bodyErrors(ContactBody, body);
      // The import runs on after this answer; its page follows it. A failure is recorded on the import.
      runImport(db, id, check, ctx.clock, { oneConnection: ctx.database.oneConnection }).catch((error) =>
        request.log.error({ err: error, import: id }, 'contact import failed'),
      );
    }
  }
  return reply.redirect(`/contacts/import/${id}`, 303);
}

export async function contactImportPages(web: App, ctx: AppContext): Promise<void> {
  web.get('/contacts/import', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    return sendUploadForm(reply, ctx, viewer, emptyForm());
  });
  web.get('/contacts/import/:id', { schema: { ...PAGE_SCHEMA, params: ImportParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    return sendImportPage(reply, ctx, viewer, request.params.id, emptyForm());
  });
  web.get('/contacts/import/:id/refused.csv', { schema: { ...PAGE_SCHEMA, params: ImportParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const row = await foundImport(ctx, viewer, request.params.id);
    const lines = (row.refused ?? []).map(refusedWords).map((r) => [String(r.line), r.label, r.value, r.why].map(csvField).join(','));
    return reply
      .header('Cache-Control', 'no-store')
      .header('Content-Disposition', `attachment; filename="contact-import-${row.id}-refused.csv"`)
      .type('text/csv; charset=utf-8')
      .send(['line,field,value,why', ...lines, ''].join('\r\n'));
  });
  web.post('/contacts/import/:id', { schema: { ...PAGE_SCHEMA, params: ImportParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    return postImport(request, reply, ctx, viewer, request.params.id);
  });

  // The upload is multipart: its parser lives in a scope of its own, as the drop's does.
  await web.register(async (scope: App) => {
    await scope.register(multipart, {
      limits: { files: 1, fields: 2, parts: 3, fieldSize: 4096, fieldNameSize: 100, fileSize: MAX_IMPORT_BYTES },
    });
    scope.post('/contacts/import', { schema: PAGE_SCHEMA, config: { multipartForm: true } }, async (request, reply) => {
      const viewer = request.viewer;
      if (!viewer) return toSignIn(request, reply);
      refuseCancelled(viewer.session, CANCELLED_MAY);
      const staged = await stageUpload(ctx, viewer, request);
      if (staged === null) {
        return sendMessage(
          reply,
          403,
          { title: 'The form could not be accepted', text: 'It came without its security token. Reload the page and try again.' },
          viewer.session,
        );
      }
      if (typeof staged === 'string')
        return sendUploadForm(reply, ctx, viewer, { values: {}, errors: [{ field: 'file', message: staged }] }, 422);
      return reply.redirect(`/contacts/import/${staged}`, 303);
    });
  });
}
