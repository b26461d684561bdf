import { join } from 'node:path';
import { Eta } from 'eta';
import type { FastifyReply } from 'fastify';
import { fullName } from '../identity/users.ts';
import type { WebSession } from './sessions.ts';

/**
 * Server-rendered pages: Eta templates in ./views, every `<%= %>` HTML-escaped. Pages are never
 * cached anywhere (they show keys, CSRF tokens and account state).
 */
const eta = new Eta({ views: join(import.meta.dirname, 'views'), cache: true, autoEscape: true });

/** Pages are not part of the API: their routes stay out of the OpenAPI document. */
export const PAGE_SCHEMA = { hide: true } as const;

interface PageData {
  title: string;
  session?: WebSession | null;
  /** The main navigation's entry this page belongs to (marked `aria-current`). */
  section?: Section;
  [name: string]: unknown;
}

/** The main navigation of every signed-in page, in its order. */
const NAV = [
  { section: 'dashboard', href: '/', label: 'Dashboard' },
  { section: 'emails', href: '/emails', label: 'Emails' },
  { section: 'drops', href: '/drops', label: 'Drops' },
  { section: 'replies', href: '/replies', label: 'Replies' },
  { section: 'contacts', href: '/contacts', label: 'Contacts' },
  { section: 'suppressions', href: '/suppressions', label: 'Suppressions' },
  { section: 'users', href: '/users', label: 'Users', managers: true },
  { section: 'settings', href: '/account/settings', label: 'Settings' },
] as const;
type Section = (typeof NAV)[number]['section'];

/** A view rendered on its own, for pages outside the signed-in layout. */
export function renderView(view: string, data: object): string {
  return eta.render(view, data);
}

/**
 * A page in the layout: the header, and for a signed-in session the navigation and, for those who
 * may act for others, the switcher (`viewer.ts`); `returnTo` brings the switcher back to this page.
 */
export function sendPage(reply: FastifyReply, view: string, data: PageData, status = 200): FastifyReply {
  const session = data.session ?? null;
  const viewer = session ? reply.request.viewer : null;
  const html = eta.render(view, {
    ...data,
    session,
    viewer,
    // Users is for those who manage others (Team Administrators and Administrators) only.
    nav: NAV.filter((item) => !('managers' in item) || viewer?.canSwitch).map((item) => ({
      ...item,
      current: item.section === data.section,
    })),
    // A page answering a POST (a refused form) has no address of its own to come back to.
    returnTo: reply.request.method === 'GET' ? reply.request.url : '/',
    ownerName: viewer ? fullName(viewer.owner) : '',
    userName: session ? fullName(session.user) : '',
    csrfToken: session?.csrfToken ?? '',
  });
  return reply.code(status).header('Cache-Control', 'no-store').type('text/html; charset=utf-8').send(html);
}

/**
 * An email's HTML for a preview frame: its own CSP makes it a sandbox (no script, no forms, no top
 * navigation, an opaque origin) that only Hopper's own pages may frame; inline styles, which email
 * HTML lives on, are allowed in it alone.
 */
export function sendSandboxed(reply: FastifyReply, html: string): FastifyReply {
  return reply
    .header(
      'Content-Security-Policy',
      "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src https: data:; frame-ancestors 'self'",
    )
    .header('X-Frame-Options', 'SAMEORIGIN')
    .header('Cache-Control', 'no-store')
    .type('text/html; charset=utf-8')
    .send(html);
}

/** A page that only says what happened and where to go next (errors, expired forms). */
export function sendMessage(
  reply: FastifyReply,
  status: number,
  message: { title: string; text: string; link?: { href: string; label: string } },
  session: WebSession | null = null,
): FastifyReply {
  return sendPage(reply, 'message', { ...message, session }, status);
}

const DATE_PARTS = { year: 'numeric', month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit', timeZoneName: 'short' } as const;

/**
 * One formatter per time zone: making an Intl.DateTimeFormat costs a fraction of a millisecond,
 * which a report's 50 rows paid 50 times (bench/pages.ts).
 */
const formatters = new Map<string, Intl.DateTimeFormat>();
function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    try {
      formatter = new Intl.DateTimeFormat('en-US', { ...DATE_PARTS, timeZone });
    } catch {
      // A zone the runtime no longer knows: UTC rather than no date at all.
      formatter = new Intl.DateTimeFormat('en-US', { ...DATE_PARTS, timeZone: 'UTC' });
    }
    if (formatters.size >= 1000) formatters.clear();
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/** `Jul 12, 2026, 4:56 PM UTC`, in the user's own time zone when they have one. */
export function formatForUser(date: Date | null, timeZone: string | null): string {
  if (!date) return '';
  return formatterFor(timeZone ?? 'UTC').format(date);
}
