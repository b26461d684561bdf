import type { AppContext } from '../../app-context.ts';
import type { App } from '../../http/fastify-types.ts';
import { latestReplies } from '../../inbound/replies.ts';
import { dailyCounters, scheduledNext } from '../../messages/message-tables.ts';
import { isTimeZone } from '../../time.ts';
import { lineChart } from '../charts.ts';
import { formatForUser, PAGE_SCHEMA, sendPage } from '../render.ts';
import type { Viewer } from '../viewer.ts';
import { senderHealth } from './sender-health.ts';

/** How far back the dashboard looks. */
const DAYS = 30;
const DAY_MS = 86_400_000;

/** The figures of the dashboard, with the label each has on the page and in the chart's table. */
const FIGURES = [
  ['sent', 'Sent'],
  ['delivered', 'Delivered'],
  ['reply', 'Replies'],
  ['bounce', 'Bounces'],
  ['spamreport', 'Complaints'],
  ['unsubscribe', 'Unsubscribes'],
] as const;

/** `YYYY-MM-DD` of a moment in a time zone (en-CA writes dates so). */
function dayIn(date: Date, timeZone: string): string {
  return new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(date);
}

/**
 * `/`: signed out, what Hopper is and the way in; signed in, the dashboard of the user the pages
 * are for — the last 30 days of their messages at a glance with a chart by day, what is scheduled
 * next, the replies waiting, and the sender's health (sender-health.ts).
 */
export async function dashboardPage(web: App, ctx: AppContext): Promise<void> {
  web.get('/', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return sendPage(reply, 'welcome', { title: 'Hopper' });
    return sendPage(reply, 'dashboard', {
      title: 'Dashboard',
      section: 'dashboard',
      session: viewer.session,
      ...(await dashboard(ctx, viewer)),
    });
  });
}

async function dashboard({ database: { db }, clock, config }: AppContext, viewer: Viewer) {
  const owner = viewer.owner;
  const timeZone = owner.time_zone && isTimeZone(owner.time_zone) ? owner.time_zone : 'UTC';
  const now = clock();
  const days = Array.from({ length: DAYS }, (_, i) => dayIn(new Date(now.getTime() - (DAYS - 1 - i) * DAY_MS), timeZone));
  const since = new Date(now.getTime() - DAYS * DAY_MS);
  const [daily, scheduled, replies, health] = await Promise.all([
    dailyCounters(db, owner.id, since, timeZone),
    scheduledNext(db, owner.id, 5),
    latestReplies(db, owner.id, 5),
    senderHealth(db, config, owner.id, timeZone),
  ]);
  const byDay = new Map(daily.map((row) => [row.day, row]));
  const totals = FIGURES.map(([name, label]) => ({
    label,
    value: days.reduce((sum, day) => sum + (byDay.get(day)?.[name] ?? 0), 0),
  }));
  const chart = lineChart({
    label: `Sent, delivered, replies and bounces by day over the last ${DAYS} days`,
    caption: `Each day's messages over the last ${DAYS} days (${timeZone})`,
    pointHeading: 'Day',
    points: days.map((day) => day.slice(5)),
    series: FIGURES.map(([name, label]) => ({ label, values: days.map((day) => byDay.get(day)?.[name] ?? 0) })),
  });
  return {
    totals,
    chart,
    timeZone,
    scheduled: scheduled.map((m) => ({
      href: `/${m.kind === 'templated_email' ? 'emails' : 'drops'}/${m.id}`,
      kind: m.kind === 'templated_email' ? 'Email' : 'Drop',
      name: m.name,
      when: m.send_at ? formatForUser(m.send_at, timeZone) : 'As soon as possible',
    })),
    replies: replies.rows.map((r) => ({
      from: r.from_name ? `${r.from_name} <${r.from_address}>` : r.from_address,
      subject: r.subject,
      href: r.message_kind === 'templated_email' ? `/emails/${r.message_id}` : `/drops/${r.message_id}`,
      when: formatForUser(r.received_at, timeZone),
      held: r.held_reason,
    })),
    held: replies.held,
    health,
  };
}
