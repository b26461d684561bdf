import { Type } from 'typebox';
import type { AppContext } from '../../app-context.ts';
import { CountCache, DEFAULT_PER_PAGE } from '../../db/search.ts';
import type { App } from '../../http/fastify-types.ts';
import { StringEnum } from '../../json-schema.ts';
import { MESSAGE_STATUSES } from '../../messages/lifecycle.ts';
import type { DropView, EmailView } from '../../messages/message-tables.ts';
import { deliveryProgress } from '../../sending/deliveries.ts';
import { formatForUser, PAGE_SCHEMA, sendPage } from '../render.ts';
import { toSignIn } from '../viewer.ts';
import { COUNTER_LABELS, DROP_PAGES, EMAIL_PAGES, type PageKind } from './message-kinds.ts';

/** A list's query: the search box, the status (empty: any), the page — the API's own parameters underneath. */
const ListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 255 })),
  status: Type.Optional(StringEnum(['', ...MESSAGE_STATUSES])),
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
});

/** `/emails` and `/drops`: the messages of the user the pages are for, as the API's search finds them. */
export async function messageListPages(web: App, ctx: AppContext): Promise<void> {
  for (const kind of [EMAIL_PAGES, DROP_PAGES] as PageKind[]) listPage(web, ctx, kind);
}

function listPage(web: App, { database: { db } }: AppContext, kind: PageKind): void {
  // Totals reused while the owner's messages are unchanged, as the API's search does (CountCache).
  const totals = new CountCache();
  web.get(kind.path, { schema: { ...PAGE_SCHEMA, querystring: ListQuery } }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const { q = '', status = '', page = 1 } = request.query;
    const text = q.trim();
    // The API's filters, OR-combined as the API combines them (README, "Search").
    const params = {
      page,
      per_page: DEFAULT_PER_PAGE,
      ...(text ? { [kind.textFilter]: [text] } : {}),
      ...(status ? { status: [status] } : {}),
    };
    const result = await kind.search(db, viewer.owner.id, params, totals);
    const sending = result.rows.filter((view) => view.row.status === 'Sending').map((view) => view.row.id);
    const progress = await deliveryProgress(db, kind.kind, sending);
    const timeZone = viewer.owner.time_zone;
    const rows = result.rows.map((view: EmailView | DropView) => ({
      href: `${kind.path}/${view.row.id}`,
      name: kind.nameOf(view as never) || `(no ${kind.textFilter})`,
      status: view.row.status,
      schedule: schedule(view, timeZone),
      counters: kind.headline.map((name) => view.reporting[name]),
      progress: progress.get(view.row.id),
    }));
    const lastPage = Math.max(1, Math.ceil(result.total / result.perPage));
    const link = (n: number) => `${kind.path}?${new URLSearchParams({ q: text, status, page: String(n) }).toString()}`;
    return sendPage(reply, 'message-list', {
      title: kind.title,
      section: kind.path === '/emails' ? 'emails' : 'drops',
      session: viewer.session,
      kind: { ...kind, headline: kind.headline.map((name) => COUNTER_LABELS[name]) },
      query: { q: text, status },
      statuses: MESSAGE_STATUSES,
      rows,
      total: result.total,
      page: result.page,
      lastPage,
      prev: result.page > 1 ? link(result.page - 1) : null,
      next: result.page < lastPage ? link(result.page + 1) : null,
    });
  });
}

/** When a message went, goes or would go, in words. */
function schedule({ row }: EmailView | DropView, timeZone: string | null): string {
  if (row.sent_at) return `Sent ${formatForUser(row.sent_at, timeZone)}`;
  if (row.sending_at) return `Started ${formatForUser(row.sending_at, timeZone)}`;
  if (row.status === 'Scheduled') return row.send_at ? `For ${formatForUser(row.send_at, timeZone)}` : 'As soon as possible';
  return row.send_at ? `Planned for ${formatForUser(row.send_at, timeZone)}` : 'Not scheduled';
}
