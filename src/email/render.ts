import type Mail from 'nodemailer/lib/mailer/index.js';
import type { SmtpRelay } from '../config.ts';
import type { TemplatedEmailRow } from '../db/schema.ts';
import type { ClaimedDelivery } from '../sending/deliveries.ts';
import { htmlToText } from './email-text.ts';
import type { SenderIdentity } from './sender-identity.ts';
import { MAX_LINK_INDEX, type TrackingTokens } from './tokens.ts';

/** A rendered email as nodemailer takes it, with the stable Message-ID of its delivery. */
export type OutgoingEmail = Mail.Options & { messageId: string };

/** What every email of one templated email shares, loaded once per batch. */
export interface PreparedEmail {
  message: TemplatedEmailRow;
  signatureHtml: string | null;
  /** From, Reply-To and postal address of the message's owner (sender.ts). */
  sender: SenderIdentity;
  /** INBOUND_DOMAIN: answers, bounces and mailed unsubscribes come back to tokens at it; undefined: off. */
  inboundDomain?: string | undefined;
  /** TRACK_OPENS: the open pixel is added only when this is true. */
  trackOpens?: boolean;
  /** The host part of Message-IDs and of the unsubscribe mailto: PUBLIC_URL's host. */
  domain: string;
  /** PUBLIC_URL: where the open pixel, click redirects and unsubscribe link point. */
  publicUrl: string;
  /** The relay SMTP_URL names (SMTP_RELAY): its own tracking header goes to it alone. */
  relay?: SmtpRelay;
  tokens: TrackingTokens;
}

type Person = Pick<ClaimedDelivery, 'first_name' | 'last_name'>;
/** What an email's content is made of: the message's words and its signature. */
type Content = {
  message: Pick<TemplatedEmailRow, 'subject' | 'greeting_with_first_name' | 'greeting_without_first_name' | 'body' | 'closing' | 'ps_line'>;
  signatureHtml: string | null;
};

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text as HTML that shows it as it is, in an element or an attribute's quotes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

/**
 * Fills {{first_name}}, {{last_name}} and {{full_name}} (spaces inside the braces allowed). In
 * HTML the values are escaped: a contact named `<script>` stays text.
 */
function fillMergeTags(template: string, person: Person, html: boolean): string {
  const values: Record<string, string> = {
    first_name: person.first_name ?? '',
    last_name: person.last_name ?? '',
    full_name: [person.first_name, person.last_name].filter(Boolean).join(' '),
  };
  return template.replace(/\{\{\s*(first_name|last_name|full_name)\s*\}\}/g, (_, name: string) => {
    const value = values[name] ?? '';
    return html ? escapeHtml(value) : value;
  });
}

/**
 * The HTML content of one contact's email before tracking is added: greeting (with or without
 * first name), body, closing, signature, P.S. The click redirect reads a message's links from
 * this same function, so link N of a token is link N of the email that carried it.
 */
export function composeHtml(content: Content, person: Person): string {
  const { message } = content;
  const greeting = person.first_name?.trim() ? message.greeting_with_first_name : message.greeting_without_first_name;
  const fill = (text: string) => fillMergeTags(text, person, true);
  const paragraph = (text: string) => (text.trim() ? `<p>${fill(escapeHtml(text))}</p>` : '');
  return [
    paragraph(greeting),
    fill(message.body),
    paragraph(message.closing),
    content.signatureHtml ? `<div class="signature">${content.signatureHtml}</div>` : '',
    postscript(message.ps_line) ? `<p>P.S. ${fill(escapeHtml(postscript(message.ps_line)))}</p>` : '',
  ]
    .filter(Boolean)
    .join('\n');
}

/** A P.S. line without the "P.S." its writer may have begun it with (Hopper writes one): never "P.S. P.S.". */
function postscript(line: string): string {
  return line.trim().replace(/^(?:p\.\s?s\.|p\.?s\b\.?)\s*(?:[:-]\s*)?/i, '');
}

/** The subject one contact's email carried, its merge tags filled. */
export function subjectFor(message: Pick<TemplatedEmailRow, 'subject'>, person: Person): string {
  return fillMergeTags(message.subject, person, false).replace(/[\r\n]+/g, ' ');
}

/** The absolute URLs of one delivery's tracking and unsubscribe links. */
function trackingLinks(publicUrl: string, tokens: TrackingTokens, deliveryId: number) {
  const unsubscribeToken = tokens.sign('unsubscribe', deliveryId);
  return {
    open: `${publicUrl}/t/o/${tokens.sign('open', deliveryId)}.gif`,
    click: (link: number) => `${publicUrl}/t/c/${tokens.sign('click', deliveryId, link)}`,
    unsubscribe: `${publicUrl}/unsubscribe/${unsubscribeToken}`,
    unsubscribeToken,
  };
}

/** The text form of a message's signature, worked out once per prepared message (not per email). */
const signatureTexts = new WeakMap<PreparedEmail, string>();
function signatureText(prepared: PreparedEmail): string {
  if (!prepared.signatureHtml) return '';
  let text = signatureTexts.get(prepared);
  if (text === undefined) {
    text = htmlToText(prepared.signatureHtml);
    signatureTexts.set(prepared, text);
  }
  return text;
}

/**
 * One contact's email: the composed content with every http(s) link sent through the click
 * redirect, a visible unsubscribe link and the open pixel; a text part with the original links
 * and the unsubscribe URL; RFC 8058 one-click unsubscribe headers.
 */
export function renderEmail(prepared: PreparedEmail, delivery: ClaimedDelivery): OutgoingEmail {
  const { message } = prepared;
  const links = trackingLinks(prepared.publicUrl, prepared.tokens, delivery.id);
  const { sender, inboundDomain, tokens } = prepared;
  const mailto = inboundDomain
    ? `mailto:u-${tokens.signForAddress('unsubscribe', delivery.id)}@${inboundDomain}?subject=unsubscribe`
    : `mailto:unsubscribe@${prepared.domain}?subject=unsubscribe-${links.unsubscribeToken}`;
  const postal = sender.postalAddress?.trim() ?? '';
  const html = emailHtml(prepared, delivery, postal, links, prepared.trackOpens === true);

  const greeting = delivery.first_name?.trim() ? message.greeting_with_first_name : message.greeting_without_first_name;
  const fill = (text: string, asHtml: boolean) => fillMergeTags(text, delivery, asHtml);
  const closing = [fill(message.closing.trim(), false), signatureText(prepared)].filter(Boolean).join('\n');
  const text = [
    fill(greeting.trim(), false),
    htmlToText(fill(message.body, true)),
    closing,
    postscript(message.ps_line) ? `P.S. ${fill(postscript(message.ps_line), false)}` : '',
    postal,
    `Unsubscribe: ${links.unsubscribe}`,
  ]
    .filter(Boolean)
    .join('\n\n');

  return {
    messageId: `<${delivery.message_kind}-${delivery.message_id}.${delivery.id}@${prepared.domain}>`,
    from: sender.from,
    // With the receiver on, answers come back through it (counted, then forwarded to the sender).
    ...(inboundDomain
      ? { replyTo: { name: sender.own.name, address: `r-${tokens.signForAddress('reply', delivery.id)}@${inboundDomain}` } }
      : sender.replyTo
        ? { replyTo: sender.replyTo }
        : {}),
    // VERP: a bounce names the delivery it is about by the address it comes back to.
    ...(inboundDomain ? { envelope: { from: `b-${tokens.signForAddress('bounce', delivery.id)}@${inboundDomain}` } } : {}),
    to: delivery.address,
    subject: subjectFor(message, delivery),
    html: `<!doctype html><html><body>${html}</body></html>`,
    text,
    headers: {
      // One header, both URIs (nodemailer's `list` option would write two headers); folded only
      // at the space, so no URL is cut.
      'List-Unsubscribe': rawHeader(`<${links.unsubscribe}>, <${mailto}>`, true),
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
      // RFC 2919: the sender's emails are one list. Filters read List-Unsubscribe without List-Id as
      // a half-made list header (SpamAssassin's LIST_PARTIAL_SHORT_MSG, +1 on a short email).
      'List-Id': `<u${message.user_id}.${prepared.domain}>`,
      // Gmail's feedback loop reports spam rates per value (campaign:customer:type:sender).
      'Feedback-ID': `m${delivery.message_id}:u${message.user_id}:${delivery.message_kind}:${prepared.domain}`,
      ...relayHeaders(prepared.relay, delivery.id),
    },
  };
}

/**
 * The HTML a recipient sees: the composed content (its links through the click redirect when
 * tracked), the postal address, the unsubscribe line and, with TRACK_OPENS, the open pixel.
 */
function emailHtml(
  content: Content,
  person: Person,
  postal: string,
  links: ReturnType<typeof trackingLinks> | undefined,
  trackOpens: boolean,
): string {
  const composed = composeHtml(content, person);
  return [
    links ? rewriteLinks(composed, (index) => links.click(index)) : composed,
    postal ? `<p style="font-size:12px;color:#6b6b6b">${escapeHtml(postal).replace(/\r?\n/g, '<br>')}</p>` : '',
    `<p style="font-size:12px;color:#6b6b6b">Don't want these emails? <a href="${links?.unsubscribe ?? '#unsubscribe'}">Unsubscribe</a>.</p>`,
    links && trackOpens ? `<img src="${links.open}" width="1" height="1" alt="">` : '',
  ]
    .filter(Boolean)
    .join('\n');
}

/**
 * An email as a recipient will see it before it is sent (the compose page's Preview): what
 * `renderEmail` writes for `person`, without the tracking no delivery exists for yet — its links
 * as written, the unsubscribe link inert.
 */
export function previewEmail(content: Content, person: Person, postalAddress: string | null): { subject: string; html: string } {
  return { subject: subjectFor(content.message, person), html: emailHtml(content, person, postalAddress?.trim() ?? '', undefined, false) };
}

/**
 * The one header the relay of SMTP_URL reads back into its webhooks, to that relay alone: another
 * relay would pass it on to the recipient, telling them Hopper's delivery ids for nothing.
 */
function relayHeaders(relay: SmtpRelay | undefined, deliveryId: number): Record<string, string | { prepared: boolean; value: string }> {
  switch (relay) {
    case 'sendgrid':
      // SendGrid hands these back on every event of the message: how its webhook finds the
      // delivery. Raw JSON: an RFC 2047-encoded value would be unreadable to SendGrid.
      return { 'X-SMTPAPI': rawHeader(JSON.stringify({ unique_args: { hopper_delivery_id: String(deliveryId) } }), false) };
    case 'postmark':
      // Postmark's equivalent: metadata it hands back in its bounce and complaint webhooks.
      return { 'X-PM-Metadata-hopper_delivery_id': String(deliveryId) };
    default:
      return {};
  }
}

/** A header value nodemailer writes as it is (no RFC 2047 encoding), with control characters removed. */
function rawHeader(value: string, foldLines: boolean): { prepared: boolean; value: string } {
  // foldLines is a nodemailer option its type declarations lack.
  return { prepared: true, foldLines, value: value.replace(/\p{Cc}/gu, '') } as { prepared: boolean; value: string };
}

// An <a> start tag, its attributes one by one: a URL-looking text in another attribute's value is
// not taken for the link.
// Names and bare values never hold `<`, so a run of broken tags is scanned once, not once per tag.
const ANCHOR = /<a\b((?:\s+[^\s"'<>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?)*)(\s*\/?>)/gi;
const ATTRIBUTE = /(\s+)([^\s"'<>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?/g;

/**
 * Visits the http(s) links (`<a href>`) of HTML in order; `each` may return a new href. Links
 * past the highest index a token can carry are neither counted nor rewritten.
 */
function mapLinks(html: string, each: (url: string, index: number) => string | undefined): string {
  let index = 0;
  return html.replace(ANCHOR, (tag, attributes: string, end: string) => {
    let seenHref = false;
    const rewritten = attributes.replace(ATTRIBUTE, (attribute, space: string, name: string, dq?: string, sq?: string, bare?: string) => {
      if (name.toLowerCase() !== 'href' || seenHref) return attribute;
      seenHref = true;
      const url = decodeEntities((dq ?? sq ?? bare ?? '').trim());
      if (!/^https?:\/\//i.test(url) || index > MAX_LINK_INDEX) return attribute;
      const href = each(url, index++);
      return href === undefined ? attribute : `${space}href="${escapeHtml(href)}"`;
    });
    return rewritten === attributes ? tag : `<a${rewritten}${end}`;
  });
}

/** The http(s) links of HTML, in order and entity-decoded: what a click token's index points into. */
export function linksIn(html: string): string[] {
  const links: string[] = [];
  mapLinks(html, (url) => {
    links.push(url);
    return undefined;
  });
  return links;
}

function rewriteLinks(html: string, hrefFor: (index: number) => string): string {
  return mapLinks(html, (_url, index) => hrefFor(index));
}

const NAMED_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]{1,6}|#\d{1,7}|amp|lt|gt|quot|apos);/gi, (entity, name: string) => {
    if (name[0] !== '#') return NAMED_ENTITIES[name.toLowerCase()] ?? entity;
    const code = name[1] === 'x' || name[1] === 'X' ? Number.parseInt(name.slice(2), 16) : Number(name.slice(1));
    return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : entity;
  });
}
