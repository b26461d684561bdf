import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import type { DeliveryState, RecordedOutcome } from '../../db/schema.ts';
import { composeHtml, escapeHtml, subjectFor } from '../../email/render.ts';
import { findSignatureBody } from '../../email/signatures.ts';
import type { App } from '../../http/fastify-types.ts';
import { requireReachable } from '../../identity/access.ts';
import { replyTimeline } from '../../inbound/replies.ts';
import { Id, StringEnum } from '../../json-schema.ts';
import { publicFileUrl } from '../../media/media.ts';
import type { DropView, EmailView } from '../../messages/message-tables.ts';
import { COUNTERS, type Counter, type Reporting } from '../../messages/reporting.ts';
import { deliveryTimeline, type RecipientRow, recipientsAfter } from '../../sending/deliveries.ts';
import { DELIVERY_STATES } from '../../sending/delivery-states.ts';
import { funnelChart, lineChart } from '../charts.ts';
import { formatForUser, PAGE_SCHEMA, sendPage, sendSandboxed } from '../render.ts';
import { toSignIn, type Viewer } from '../viewer.ts';
import { COUNTER_LABELS, DROP_PAGES, EMAIL_PAGES, type PageKind } from './message-kinds.ts';

const RECIPIENTS_PER_PAGE = 50;
/** Rows the CSV export reads per statement. */
const EXPORT_BATCH = 2_000;
const HOUR = 3_600;

/** A delivery's state in words. */
export const STATE_WORDS: Record<DeliveryState, string> = {
  queued: 'Queued',
  sending: 'Being handed over',
  deferred: 'Retrying',
  held: 'Held',
  sent: 'Sent',
  delivered: 'Delivered',
  bounced: 'Bounced',
  dropped: 'Dropped',
  failed: 'Failed',
  cancelled: 'Cancelled',
  skipped: 'Skipped (same address as another)',
};

const ReportQuery = Type.Object({
  state: Type.Optional(StringEnum(['', ...DELIVERY_STATES])),
  after: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
});
const ReportParams = Type.Object({ id: Id });

/**
 * `/emails/{id}` and `/drops/{id}`: the report of one message — the fourteen counters of
 * `reporting` with the API's values, a funnel and a timeline, the recipients (paged by keys,
 * filtered by state, exported as CSV), and the email as sent (a sandboxed frame) or the drop's
 * audio. The message must be reachable by the signed-in user under the API's rule
 * (`requireReachable`): 404 when there is none, 403 when it is someone else's.
 */
export async function messageReportPages(web: App, ctx: AppContext): Promise<void> {
  for (const kind of [EMAIL_PAGES, DROP_PAGES] as PageKind[]) reportPages(web, ctx, kind);
  emailPreview(web, ctx);
}

function named(kind: PageKind): string {
  return kind.kind === 'templated_email' ? 'Templated email' : 'Voicemail drop';
}

function reportPages(web: App, ctx: AppContext, kind: PageKind): void {
  const { db } = ctx.database;
  const timelines = new TimelineCache();
  const found = async (viewer: Viewer, id: number) => requireReachable(viewer.principal, await kind.find(db, id), named(kind), id);

  web.get(`${kind.path}/:id`, { schema: { ...PAGE_SCHEMA, params: ReportParams, querystring: ReportQuery } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const view = await found(viewer, request.params.id);
    const { state = '', after = 0 } = request.query;
    const states = state ? [state as DeliveryState] : DELIVERY_STATES;
    const rows = await recipientsAfter(db, kind.kind, view.row.id, { states, afterId: after, limit: RECIPIENTS_PER_PAGE + 1 });
    const more = rows.length > RECIPIENTS_PER_PAGE;
    const shown = rows.slice(0, RECIPIENTS_PER_PAGE);
    const timeZone = viewer.owner.time_zone;
    const base = `${kind.path}/${view.row.id}`;
    return sendPage(reply, 'message-report', {
      title: kind.nameOf(view as never) || `${named(kind)} ${view.row.id}`,
      section: kind.path === '/emails' ? 'emails' : 'drops',
      session: viewer.session,
      kind,
      view,
      facts: facts(view, timeZone),
      counters: COUNTERS.map((name) => ({ name, label: COUNTER_LABELS[name], value: view.reporting[name] })),
      funnel: funnel(kind, view.reporting),
      timeline: await timelines.get(ctx, kind, view, timeZone),
      audio: 'media' in view ? publicFileUrl('', (view as DropView).media) : null,
      states: DELIVERY_STATES.map((value) => ({ value, label: STATE_WORDS[value] })),
      state,
      recipients: shown.map((row) => recipient(row, timeZone)),
      first: after > 0 ? `${base}?${new URLSearchParams({ state }).toString()}#recipients` : null,
      next: more ? `${base}?${new URLSearchParams({ state, after: String(shown.at(-1)?.id) }).toString()}#recipients` : null,
      csv: `${base}/recipients.csv${state ? `?state=${state}` : ''}`,
      api: `/v3/${kind.apiPath}/${view.row.id}`,
    });
  });

  web.get(
    `${kind.path}/:id/recipients.csv`,
    { schema: { ...PAGE_SCHEMA, params: ReportParams, querystring: ReportQuery } },
    async (request, reply) => {
      const viewer = request.viewer;
      if (!viewer) return toSignIn(request, reply);
      const view = await found(viewer, request.params.id);
      return sendCsv(ctx, request, reply, kind, view, viewer.owner.time_zone);
    },
  );
}

/** The message's own facts: status, schedule, times. */
function facts({ row }: EmailView | DropView, timeZone: string | null) {
  const when = (date: Date | null) => (date ? formatForUser(date, timeZone) : '—');
  return [
    { label: 'Status', value: row.status },
    { label: 'Send', value: row.send_type === 'Now' ? 'Now' : `At ${when(row.send_at)}` },
    { label: 'Started sending', value: when(row.sending_at) },
    { label: 'Finished', value: when(row.sent_at) },
  ];
}

function funnel(kind: PageKind, reporting: Reporting) {
  const steps = (
    kind.kind === 'templated_email'
      ? (['sent', 'delivered', 'open', 'click', 'reply'] as const)
      : (['sent', 'delivered'] as const satisfies readonly Counter[])
  ).map((name) => ({ label: COUNTER_LABELS[name], value: reporting[name] }));
  return funnelChart({
    label: `Funnel: ${steps.map((s) => `${s.label} ${s.value.toLocaleString('en-US')}`).join(', ')}`,
    caption: 'How many got as far as each step',
    steps,
  });
}

/** An outcome in words: Hopper's class, the server's or provider's code and words, who said it. */
export function outcomeWords(outcome: RecordedOutcome | null, lastError: string | null): string {
  if (!outcome) return lastError ?? '';
  const kind = outcome.classification.replaceAll('_', ' ');
  const head = `${kind[0]?.toUpperCase()}${kind.slice(1)}${outcome.permanent && outcome.classification !== 'delivered' ? ' (permanent)' : ''}`;
  const said = [outcome.code, outcome.description].filter(Boolean).join(' ');
  return `${head}${said ? `: ${said}` : ''} — said by ${outcome.source}`;
}

function recipient(row: RecipientRow, timeZone: string | null) {
  return {
    address: row.address,
    name: [row.first_name, row.last_name].filter(Boolean).join(' '),
    contactHref: `/contacts/${row.contact_id}`,
    state: STATE_WORDS[row.state],
    outcome: outcomeWords(row.outcome, row.last_error),
    at: formatForUser(row.updated_at, timeZone),
  };
}

/**
 * A field of the CSV: quoted when it must be (RFC 4180), and a leading `=`, `+`, `-` or `@` made
 * text with an apostrophe, so that a spreadsheet never runs a name as a formula (OWASP's CSV injection).
 */
export function csvField(value: string): string {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

async function sendCsv(
  ctx: AppContext,
  request: FastifyRequest,
  reply: FastifyReply,
  kind: PageKind,
  view: EmailView | DropView,
  timeZone: string | null,
) {
  const { state = '' } = request.query as { state?: DeliveryState | '' };
  const states = state ? [state] : DELIVERY_STATES;
  const { db } = ctx.database;
  async function* lines() {
    yield `${['address', 'name', 'state', 'outcome', 'last event'].join(',')}\r\n`;
    let afterId = 0;
    for (;;) {
      const rows = await recipientsAfter(db, kind.kind, view.row.id, { states, afterId, limit: EXPORT_BATCH });
      for (const row of rows) {
        const r = recipient(row, timeZone);
        yield `${[r.address, r.name, r.state, r.outcome, r.at].map(csvField).join(',')}\r\n`;
      }
      if (rows.length < EXPORT_BATCH) return;
      afterId = rows.at(-1)?.id ?? afterId;
    }
  }
  const file = `${kind.path.slice(1, -1)}-${view.row.id}-recipients${state ? `-${state}` : ''}.csv`;
  return reply
    .header('Cache-Control', 'no-store')
    .header('Content-Disposition', `attachment; filename="${file}"`)
    .type('text/csv; charset=utf-8')
    .send(Readable.from(lines()));
}

/**
 * The timeline of a report: sent, delivered and replies by the hour (by the day past 48 hours),
 * at most 60 points. Drawn again only when the message's counters change: a sent message's
 * 100,000 deliveries are not read on every view of its report.
 */
class TimelineCache {
  readonly #entries = new Map<number, { key: string; chart: ReturnType<typeof lineChart> }>();

  async get(ctx: AppContext, kind: PageKind, view: EmailView | DropView, timeZone: string | null) {
    const start = view.row.sending_at;
    if (!start) return null;
    // A finished message's timeline ends when it finished; one still sending, now.
    const end = view.row.sent_at ?? ctx.clock();
    const spanSeconds = Math.max(HOUR, (end.getTime() - start.getTime()) / 1000);
    const bucket = spanSeconds <= 48 * HOUR ? HOUR : Math.max(24 * HOUR, Math.ceil(spanSeconds / 60 / (24 * HOUR)) * 24 * HOUR);
    const points = Math.min(60, Math.floor(spanSeconds / bucket) + 1);
    const key = `${JSON.stringify(view.reporting)} ${bucket} ${points} ${timeZone}`;
    const cached = this.#entries.get(view.row.id);
    if (cached?.key === key) return cached.chart;
    const chart = await this.draw(ctx, kind, view, { start, bucket, points, timeZone });
    this.#entries.delete(view.row.id);
    if (this.#entries.size >= 500) this.#entries.delete(this.#entries.keys().next().value as number);
    this.#entries.set(view.row.id, { key, chart });
    return chart;
  }

  private async draw(
    ctx: AppContext,
    kind: PageKind,
    view: EmailView | DropView,
    o: { start: Date; bucket: number; points: number; timeZone: string | null },
  ) {
    const { db } = ctx.database;
    const [deliveries, replies] = await Promise.all([
      deliveryTimeline(db, kind.kind, view.row.id, o.bucket),
      kind.kind === 'templated_email' ? replyTimeline(db, kind.kind, view.row.id, o.bucket) : Promise.resolve([]),
    ]);
    const first = Math.floor(o.start.getTime() / 1000 / o.bucket) * o.bucket;
    const index = (at: Date) => Math.round((at.getTime() / 1000 - first) / o.bucket);
    const series = {
      sent: new Array<number>(o.points).fill(0),
      delivered: new Array<number>(o.points).fill(0),
      replies: new Array<number>(o.points).fill(0),
    };
    const add = (values: number[], at: Date, n: number) => {
      const i = Math.min(o.points - 1, Math.max(0, index(at)));
      values[i] = (values[i] ?? 0) + n;
    };
    for (const d of deliveries) add(series[d.what], d.at, d.n);
    for (const r of replies) add(series.replies, r.at, r.n);
    const zone = o.timeZone ?? 'UTC';
    const label = (i: number) =>
      new Intl.DateTimeFormat(
        'en-US',
        o.bucket < 24 * HOUR
          ? { timeZone: zone, month: 'short', day: 'numeric', hour: 'numeric' }
          : { timeZone: zone, month: 'short', day: 'numeric' },
      ).format(new Date((first + i * o.bucket) * 1000));
    return lineChart({
      label: `Timeline: sent, delivered${kind.kind === 'templated_email' ? ' and replies' : ''} by ${o.bucket < 24 * HOUR ? 'hour' : 'day'} since sending started`,
      caption: `By ${o.bucket < 24 * HOUR ? 'hour' : 'day'} (${zone}; the last point includes anything later)`,
      pointHeading: o.bucket < 24 * HOUR ? 'Hour' : 'Day',
      points: Array.from({ length: o.points }, (_, i) => label(i)),
      series: [
        { label: 'Sent', values: series.sent },
        { label: 'Delivered', values: series.delivered },
        ...(kind.kind === 'templated_email' ? [{ label: 'Replies', values: series.replies }] : []),
      ],
    });
  }
}

/**
 * `/emails/{id}/preview`: the email as a recipient without a first name sees it, for the report's
 * frame, sandboxed (`sendSandboxed`).
 */
function emailPreview(web: App, { database: { db } }: AppContext): void {
  web.get('/emails/:id/preview', { schema: { ...PAGE_SCHEMA, params: ReportParams } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const view = requireReachable(viewer.principal, await EMAIL_PAGES.find(db, request.params.id), 'Templated email', request.params.id);
    const { row } = view;
    const signatureHtml =
      row.signature_id === null ? null : ((await findSignatureBody(db, row.user_id, row.signature_id, { evenDeleted: true })) ?? null);
    const person = { first_name: null, last_name: null };
    const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(subjectFor(row, person))}</title></head><body>${composeHtml({ message: row, signatureHtml }, person)}</body></html>`;
    return sendSandboxed(reply, html);
  });
}
