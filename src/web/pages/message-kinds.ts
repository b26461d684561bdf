import type { Db } from '../../db/database.ts';
import type { CountCache, SearchParams, SearchResult } from '../../db/search.ts';
import { searchEmails } from '../../email/templated-emails.ts';
import type { MessageKind } from '../../messages/kinds.ts';
import { type DropView, type EmailView, findDrop, findEmail } from '../../messages/message-tables.ts';
import type { Counter } from '../../messages/reporting.ts';
import { searchDrops } from '../../voicemail/drops.ts';

/**
 * What the pages of the two message kinds (`/emails`, `/drops` and their reports) differ in: the
 * path, the words, the API's search and read, the field a search box searches, and the counters
 * a row of the list shows. Everything else is shared (message-lists.ts, message-reports.ts).
 */
export interface PageKind<View extends EmailView | DropView = EmailView | DropView> {
  kind: MessageKind;
  /** `/emails`, `/drops`. */
  path: string;
  title: string;
  /** Lower case, singular: `email`, `voicemail drop`. */
  noun: string;
  /** The API's filter a search box fills: `subject` for emails, `name` for drops. */
  textFilter: 'subject' | 'name';
  textLabel: string;
  /** The API's path segment, for the links to the JSON. */
  apiPath: string;
  search(db: Db, ownerId: number, params: SearchParams, totals: CountCache): Promise<SearchResult<View>>;
  find(db: Db, id: number): Promise<View | undefined>;
  /** What a row, or a report, is called. */
  nameOf(view: View): string;
  /** Whether `/…/new` and `/…/{id}/edit` exist (compose.ts): the lists and reports link to them. */
  composable: boolean;
  /** The counters a list row shows, with their labels. */
  headline: readonly Counter[];
}

export const EMAIL_PAGES: PageKind<EmailView> = {
  kind: 'templated_email',
  path: '/emails',
  title: 'Emails',
  noun: 'email',
  textFilter: 'subject',
  textLabel: 'Subject contains',
  apiPath: 'templated_emails',
  search: searchEmails,
  find: findEmail,
  nameOf: (view) => view.row.subject,
  composable: true,
  headline: ['sent', 'delivered', 'open', 'reply', 'bounce', 'unsubscribe'] satisfies Counter[],
};

export const DROP_PAGES: PageKind<DropView> = {
  kind: 'voicemail_drop',
  path: '/drops',
  title: 'Drops',
  noun: 'voicemail drop',
  textFilter: 'name',
  textLabel: 'Name contains',
  apiPath: 'voicemail_drops',
  search: searchDrops,
  find: findDrop,
  nameOf: (view) => view.row.name,
  composable: true,
  headline: ['sent', 'delivered', 'failed', 'dropped'] satisfies Counter[],
};

/** The words of the fourteen counters of `reporting`, in the API's order (the labels). */
export const COUNTER_LABELS: Record<Counter, string> = {
  sent: 'Sent',
  processed: 'Processed',
  delivered: 'Delivered',
  open: 'Opens',
  click: 'Clicks',
  reply: 'Replies',
  spamreport: 'Spam reports',
  unsubscribe: 'Unsubscribes',
  deferred: 'Deferred',
  dropped: 'Dropped',
  bounce: 'Bounces',
  hard_bounce: 'Hard bounces',
  soft_bounce: 'Soft bounces',
  failed: 'Failed',
};
