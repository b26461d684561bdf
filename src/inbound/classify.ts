import { convert as htmlToText } from 'html-to-text';
import type { ParsedMail } from 'mailparser';
import { classificationOf, failureReason, findStatus, isHardReason } from '../email/bounce-reason.ts';
import { lhostReason } from './bounce-lhost.ts';

/**
 * What an inbound message is, read from its parsed form (mailparser), as real mail servers write
 * them (docs/outcomes.md, "Email outcomes"):
 *
 * - a bounce: an RFC 3464 delivery status notification, or one of the non-standard forms (Exim,
 *   qmail, sendmail, Exchange, Gmail, Yahoo, Outlook, DragonFly, …) — told by its structure, its
 *   sender (`MAILER-DAEMON`, `postmaster`, an empty address) or its subject, never by
 *   `Auto-Submitted` alone (Exim's bounces carry it); each failed recipient with its DSN status,
 *   SMTP reply code, diagnostic text and reason (bounce-reason.ts);
 * - a complaint: an ARF report (RFC 5965) or a Microsoft JMRP report;
 * - a success notice (a DSN whose recipients were delivered);
 * - otherwise a person's reply, marked automatic (RFC 3834 and the vendors' headers) when it is.
 */
export interface BounceReport {
  recipient: string | null;
  /** The DSN status (`5.1.1`), when the report gives one. */
  status: string | null;
  /** The SMTP reply code (`550`), when the report gives one. */
  replyCode: string | null;
  /** The bouncing server's words. */
  diagnostic: string;
  /** Sisimai's name of the reason: `userunknown`, `mailboxfull`, `authfailure`… (bounce-reason.ts). */
  reason: string;
  /** Hopper's name of it, the delivery outcome's `classification` (docs/outcomes.md): `user_unknown`, `mailbox_full`, … */
  classification: string;
  /** The address itself is bad: sending to it again is pointless. */
  hard: boolean;
  /** The server still tries (a delay notice): nothing has failed yet. */
  delayed: boolean;
}

export type InboundKind =
  | { kind: 'bounce'; report: BounceReport }
  | { kind: 'complaint'; feedbackType: string; detail: string }
  | { kind: 'delivered' }
  | { kind: 'reply'; autoReply: boolean };

interface Hints {
  /** The envelope sender was `<>` (RFC 5321's null reverse-path, as bounces are sent). */
  nullSender?: boolean;
  /** The message as received: read when its MIME structure hides the text (a report without its parts). */
  raw?: Buffer;
}

export function classify(mail: ParsedMail, hints: Hints = {}): InboundKind {
  const contentType = headerObject(mail, 'content-type');
  const reportType =
    contentType?.value?.toLowerCase() === 'multipart/report' ? contentType.params?.['report-type']?.toLowerCase() : undefined;
  const parts = mail.attachments ?? [];
  const { whole: text, report: reportText } = bodyText(mail, hints.raw);

  const ses = readSesNotification(text);
  if (ses) return ses;

  const complaint = readComplaint(mail, reportType, text);
  if (complaint) return complaint;

  const dsn =
    reportType === 'delivery-status' || parts.some((p) => p.contentType === 'message/delivery-status') || DSN_FIELDS.test(reportText);
  if (dsn || looksLikeBounce(mail, reportText, hints.nullSender === true)) {
    const report = readReport(mail, reportText, dsn);
    // A content-filtering gateway's "unknown user" is its filter's verdict, not the mailbox's —
    // unless a x.1.1 status says the mailbox is unknown (Sisimai::Reason::UserUnknown, then Filtered).
    if (
      report &&
      report !== 'delivered' &&
      report.reason === 'userunknown' &&
      !isUnknownMailbox(report.status) &&
      isFilteringGateway(mail)
    ) {
      return { kind: 'bounce', report: { ...report, reason: 'filtered', classification: classificationOf('filtered'), hard: false } };
    }
    if (report === 'delivered') return { kind: 'delivered' };
    if (report) return { kind: 'bounce', report };
  }
  return { kind: 'reply', autoReply: isAutomatic(mail) };
}

// --- complaints --------------------------------------------------------------------------------

function readComplaint(mail: ParsedMail, reportType: string | undefined, text: string): InboundKind | undefined {
  const parts = mail.attachments ?? [];
  const feedbackPart = parts.find((p) => p.contentType === 'message/feedback-report')?.content.toString('utf8');
  const feedback = feedbackPart ?? text;
  const type = /^Feedback-Type:\s*([\w-]+)/im.exec(feedback)?.[1]?.toLowerCase();
  if (reportType === 'feedback-report' || feedbackPart !== undefined || (type && /^(User-Agent|Version):/im.test(feedback))) {
    return { kind: 'complaint', feedbackType: type ?? 'abuse', detail: `ARF ${type ?? 'abuse'}` };
  }
  // Apple Mail's unsubscribe: a mail to the List-Unsubscribe address, marked so.
  if (headerText(mail, 'x-apple-unsubscribe')?.trim().toLowerCase() === 'true') {
    return { kind: 'complaint', feedbackType: 'opt-out', detail: 'Apple Mail unsubscribe' };
  }
  // Microsoft's JMRP: the complained-of message attached to a mail from the feedback loop.
  const from = fromAddress(mail);
  const subject = mail.subject ?? '';
  const jmrp =
    headerText(mail, 'x-hmxmroriginalrecipient') !== undefined ||
    parts.some((p) => /^X-HmXmrOriginalRecipient:/im.test(p.content.toString('utf8', 0, 20_000))) ||
    /^X-HmXmrOriginalRecipient:/im.test(text);
  if (jmrp || (/staff@hotmail\.com$/i.test(from) && /complaint about message/i.test(subject))) {
    return { kind: 'complaint', feedbackType: 'abuse', detail: 'JMRP abuse' };
  }
  return undefined;
}

// --- Amazon SES notifications (SNS) --------------------------------------------------------------

/** An SES notification mailed by SNS: JSON naming the bounce type and the recipients' status and diagnostic. */
function readSesNotification(text: string): InboundKind | undefined {
  const flat = text.replace(/\\"/g, '"');
  const type = /"notificationType"\s*:\s*"(\w+)"/.exec(flat)?.[1];
  if (!type) return undefined;
  const field = (name: string) => new RegExp(`"${name}"\\s*:\\s*"([^"]*)"`).exec(flat)?.[1] ?? null;
  if (type === 'Complaint') return { kind: 'complaint', feedbackType: field('complaintFeedbackType') ?? 'abuse', detail: 'SES complaint' };
  if (type === 'Delivery') return { kind: 'delivered' };
  if (type !== 'Bounce') return undefined;
  const transient = field('bounceType') !== 'Permanent';
  const diagnostic = field('diagnosticCode') ?? `${field('bounceType')} ${field('bounceSubType')}`;
  const report = toReport(
    {
      recipient: field('emailAddress'),
      status: field('status'),
      action: transient ? 'delayed' : 'failed',
      diagnostic,
      remoteSaid: diagnostic,
    },
    diagnostic,
  );
  return { kind: 'bounce', report: transient ? { ...report, hard: false } : report };
}

// --- bounces -----------------------------------------------------------------------------------

const DSN_FIELDS = /^(Final|Original)-Recipient:\s*\S[\s\S]*?^(Action|Status):\s*\S/im;
const DAEMON = /^(mailer-daemon|postmaster|mail-daemon|mailerdaemon|mail\.delivery\.system|mdaemon|nobody|root|bounce[s]?)(@|$)/i;
const BOUNCE_NAME = /mail(er)?[ -]?daemon|mail delivery|postmaster|delivery (status|subsystem)|mail administrator|mail system|post office/i;
const BOUNCE_SUBJECT =
  /undeliver|undelivered|returned mail|return(ed)? to sender|delivery (status notification|failure|has failed|failed|problem|notification)|mail delivery (failed|failure|subsystem|system)|failure notice|could not (be )?deliver|non[ -]?deliver|nondeliverable|not delivered|delivery report|warning: (could not send|message|delayed)|delivery warning|delayed mail|delivery delayed|mail could not|message (delivery|not delivered|failed|you sent)|error sending|rejected|bounce|unable to deliver|unzustellbar|non remis|problem delivering|sending failed|permanent error|transient error|system administrator|notificaci[oó]n|メール|配信/i;

function looksLikeBounce(mail: ParsedMail, text: string, envelopeNull: boolean): boolean {
  const from = fromAddress(mail);
  const name = mail.from?.value?.[0]?.name ?? '';
  const subject = mail.subject ?? '';
  const returned = headerText(mail, 'return-path');
  const nullSender = envelopeNull || from === '' || (returned !== undefined && /^<?\s*>?$/.test(returned.trim()));
  if (DAEMON.test(from) || BOUNCE_NAME.test(name)) return true;
  if (BOUNCE_SUBJECT.test(subject) && (nullSender || findStatus(text) !== null || FAILURE_WORDS.test(text))) return true;
  if (!nullSender || !FAILURE_WORDS.test(text)) return false;
  // Sisimai reads a message as a bounce before it tries RFC 3834: a report from the null sender
  // that names a failure is one, Auto-Submitted or not (servers mark their reports so too), but
  // for an out-of-office reply that happens to use the words.
  return !isAutomatic(mail) || !OUT_OF_OFFICE.test(mail.subject ?? '');
}

const FAILURE_WORDS =
  /could not be delivered|couldn't be delivered|delivery (to the following|has failed|failed)|permanent(ly)? (fatal )?error|undeliverable|failed to deliver|was not delivered|unable to deliver|delivery problem|user unknown|not a valid (user|recipient|mailbox)|mailbox (is )?(full|unavailable)|no such user|host not found|message (could not|was not)|returned to you|did not reach|delivery (attempts|is) (will continue|delayed)|has not yet been delivered|not yet been delivered|remote host said|said:\s*[45]\d\d/i;

/**
 * Where the returned message starts in a bounce's text, as each MTA writes it: the lines Sisimai's
 * lhost modules split a bounce at (`$rebackbone`, Sisimai::RFC5322->fillet), and a few older forms
 * Mailman's bounce readers know. Everything from there on is the sender's own message — its
 * headers (`X-Mailman-Version: 2.1.5`, a `Received:` date) and body must never be read as the
 * server's words or status.
 */
const RETURNED_MESSAGE: readonly RegExp[] = [
  // A MIME part holding the message or its headers: RFC 3464 2.1, and the text of many lhost
  // modules (Postfix, Sendmail, Courier, GSuite, Office365, Exchange2003, Domino, X3, X5…).
  /^Content-Type:[ \t]*(message\/rfc822|text\/rfc822-headers|message\/partial)/im,
  // Exim (deliver.c) and MailRu: "------ This is a copy of the message, including all the headers. ------".
  /^-+ This is a copy of (the|your) message/im,
  // qmail, X4, Yahoo: "--- Below this line is a copy of the message."; X2, X4: "--- Original message follows.".
  /^-+ ?(Below this line is a copy of the message|Original message follows)/im,
  // IMailServer: "Original message follows."; FML: "Original mail as follows:".
  /^Original (message follows\.|mail as follows:)/im,
  // Sendmail (savemail.c) and Gmail: "----- Original message -----", "----- Message header follows -----";
  // GoogleGroups; V5sendmail: "----- Unsent message follows -----".
  /^[ \t]*-{3,} ?(Original message|Message header follows|Unsent message follows|No message was collected) ?-{3,}/im,
  // Notes: "------- Returned Message --------"; usa.net: "--------RETURNED MAIL FOLLOWS--------" (Mailman's SimpleMatch).
  /^[ \t]*-{3,} ?Return(ed)? (Message|Mail Follows) ?-{3,}/im,
  // Exchange2007: "Original message headers:" (en-US), "En-têtes de message d'origine :", "Intestazioni originali del messaggio:".
  /^(Original message headers:|En-t.tes de message d'origine :|Intestazioni originali del messaggio:)/im,
  // GMX and EinsUndEins: "--- The header of the original message is following. ---".
  /^-+ ?The header of the original message is following/im,
  // MXLogic: "Included is a copy of the message header:"; OpenSMTPD: "Below is a copy of the original message:".
  /^[ \t]*(Included is a copy of the message header:|Below is a copy of the original message:)/im,
  // mFILTER: "-------original message", "-------original mail info".
  /^-+original (message|mail info)/im,
  // X6: "The attachment contains the original mail headers"; MDaemon (Mailman's SimpleMatch): "--- Session Transcript ---"
  // comes after the words; hotpop.com: "Original message attached".
  /^(The attachment contains the original mail headers|Original message attached)/im,
  // Forms Hopper met before Sisimai named them: "---- the original message ----", "Message headers follow", "*** Message header".
  /^[ \t]*-+ ?(the original message|original message headers|headers of the original|copy of the original|message text follows|rfc822 headers of|returned message|undelivered message|unsent message)/im,
  /^[ \t]*(message headers follow|header of original message|\*\*\* message header|the header of the original message)/im,
];

/** The text before the returned original: its headers and body would otherwise be read as the server's words. */
function cutOriginal(text: string): string {
  let end = text.length;
  for (const marker of RETURNED_MESSAGE) {
    const at = marker.exec(text)?.index;
    if (at !== undefined && at > 0 && at < end) end = at;
  }
  return text.slice(0, end);
}

interface RawFailure {
  recipient: string | null;
  status: string | null;
  action: string | null;
  diagnostic: string;
  remoteSaid: string;
}

function readReport(mail: ParsedMail, text: string, dsn: boolean): BounceReport | 'delivered' | undefined {
  const failures = dsn ? dsnFailures(text) : [];
  if (failures.length > 0) {
    const failed = failures.filter((f) => !isDelivered(f));
    if (failed.length === 0) return 'delivered';
    // Hopper sends one recipient per message: of a report on several, the first failure is ours.
    const chosen = failed[0] as RawFailure;
    const words = chosen.diagnostic || humanPart(text, chosen.recipient);
    return toReport({ ...chosen, diagnostic: words }, text, lhostReason(mail, text)?.reason);
  }
  // A non-standard bounce: the words are the human-readable part.
  const human = humanPart(text, null);
  if (!human.trim()) return undefined;
  const status = findStatus(human);
  if (status?.startsWith('2.') && !FAILURE_WORDS.test(human)) return 'delivered';
  const recipient = /<([^<>\s@]+@[^<>\s@]+)>/.exec(human)?.[1] ?? /\b([\w.+-]+@[\w-]+(?:\.[\w-]+)+)\b/.exec(human)?.[1] ?? null;
  const delayed =
    /\b(delayed|delay|not yet been delivered|will (continue|keep) trying|will be retried|still trying|retry)\b/i.test(mail.subject ?? '') ||
    /has not yet been delivered|will continue (to attempt|trying)|delivery attempts will continue|will be retried/i.test(human);
  return toReport(
    { recipient, status, action: delayed ? 'delayed' : null, diagnostic: human, remoteSaid: human },
    text,
    lhostReason(mail, text)?.reason,
  );
}

function isUnknownMailbox(status: string | null): boolean {
  return /^[45]\.1\.1$/.test(status ?? '');
}

/** Mail filters that answer for the servers behind them: m-FILTER, SurfControl, ActiveHunter, MXLogic. */
function isFilteringGateway(mail: ParsedMail): boolean {
  return (
    /m-FILTER|SurfControl/i.test(headerText(mail, 'x-mailer') ?? '') ||
    headerText(mail, 'x-ahmailid') !== undefined ||
    /@[\w.-]*\.mxlogic\.net$/i.test(fromAddress(mail))
  );
}

function isDelivered(f: RawFailure): boolean {
  return /^(delivered|relayed|expanded|deliverable)/i.test(f.action ?? '') || (f.status?.startsWith('2.') ?? false);
}

function toReport(f: RawFailure, text: string, mtaReason?: string): BounceReport {
  const diagnostic = f.diagnostic.replace(/\s+/g, ' ').trim();
  let status = f.status && f.status !== '5.0.0' && f.status !== '4.0.0' ? f.status : (findStatus(diagnostic) ?? f.status);
  // A general x.0.0 or x.1.0 over a server's words that quote their own status ("5.1.0 - Unknown
  // address error 550-'5.7.1 …'"): the quoted one is the server's (Sisimai::Lhost::AmazonSES).
  const quoted = /\b[45]\.[01]\.0\b/.test(status ?? '')
    ? /["'](?:\d{3}[ -])?([45]\.\d\.\d{1,3})\b[^"']*["']/.exec(diagnostic)?.[1]
    : undefined;
  if (quoted) status = quoted;
  const replyCode = /\b([45][0-5]\d)\b/.exec(diagnostic.replace(/^smtp;\s*/i, ''))?.[1] ?? null;
  const command = smtpCommand(text);
  const action = f.action?.toLowerCase() ?? null;
  const reason = failureReason({ status, replyCode, command, diagnostic, action, host: remoteHost(text), mtaReason });
  const delayed =
    action === 'delayed' || (status?.startsWith('4.') === true && action !== 'failed' && reason === 'expired' && /delay/i.test(text));
  return {
    recipient: f.recipient,
    status,
    replyCode,
    diagnostic: wordsOf(f.diagnostic).replace(/^smtp;\s*/i, ''),
    reason,
    classification: delayed ? 'delayed' : classificationOf(reason),
    // The reason decides, not the status's class: an unknown user under a 4.1.1 is still one
    // (Sisimai::SMTP::Error->soft_or_hard); only "not accepting mail" is soft when it is 4xx.
    hard: !delayed && isHardReason(reason) && !(reason === 'notaccept' && (status?.startsWith('4.') || replyCode?.startsWith('4'))),
    delayed,
  };
}

/** Lines every bounce of a kind repeats, which say nothing about this failure. */
const BOILERPLATE = new RegExp(
  [
    'this (message|is) (was created automatically|an automatically generated|the mail system at host|the dragonfly mail agent|a delivery status notification)',
    'a message that you sent could not be delivered',
    'this is a permanent error',
    'the following address(\\(es\\))? failed',
    "i'm sorry to have to inform you",
    'could not be delivered to one or more (recipients|destinations)',
    'for further assistance',
    'if you do so, please include',
    'you can delete your own text',
    'technical details of (permanent|temporary) failure:?\\s*$',
    'delivery to the following recipient failed permanently:?\\s*$',
    'this is a warning message only',
    'you do not need to resend',
    'the original message was received at',
    'from \\S+ \\(\\S+ \\[[\\d.]+\\]\\)$',
    '^-+.*-+$',
  ].join('|'),
  'i',
);

/** The server's words without the bounce's boilerplate, on one line. */
function wordsOf(text: string): string {
  const lines = text
    .replace(/\r/g, '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !BOILERPLATE.test(l));
  return (lines.join(' ') || text).replace(/\s+/g, ' ').trim();
}

/** The per-recipient blocks of an RFC 3464 report (fields may be folded). */
function dsnFailures(text: string): RawFailure[] {
  const unfolded = text.replace(/\r/g, '').replace(/\n[ \t]+/g, ' ');
  const blocks = unfolded.split(/\n\s*\n/);
  const out: RawFailure[] = [];
  for (const block of blocks) {
    const field = (name: string) => new RegExp(`^${name}:[ \\t]*(.*)$`, 'im').exec(block)?.[1]?.trim();
    const recipient = field('Final-Recipient') ?? field('Original-Recipient');
    const action = field('Action');
    const status = field('Status');
    if (!recipient && !(action && status)) continue;
    out.push({
      recipient: recipient
        ? recipient
            .replace(/^[\w-]+;\s*/, '')
            .replace(/[<>]/g, '')
            .trim() || null
        : null,
      status: /^([245]\.\d{1,3}\.\d{1,3})/.exec(status ?? '')?.[1] ?? null,
      action: action?.split(/\s/)[0] ?? null,
      diagnostic: field('Diagnostic-Code') ?? '',
      remoteSaid: '',
    });
  }
  return out;
}

/** The server's own words in a human-readable bounce: the lines about the failure, not the greeting. */
function humanPart(text: string, recipient: string | null): string {
  const lines = text.replace(/\r/g, '').split('\n');
  const said = lines.findIndex((l) =>
    /said:|said:$|\b[45]\d\d[ -][245]\.\d|\b[45]\d\d[ -]|remote host|reason:|diagnostic|error:|<<< /i.test(l),
  );
  const mention = recipient ? lines.findIndex((l) => l.toLowerCase().includes(recipient.toLowerCase())) : -1;
  if (said >= 0) return lines.slice(Math.max(0, said - 1), said + 6).join('\n');
  if (mention >= 0) return lines.slice(mention, mention + 6).join('\n');
  return text;
}

/**
 * The remote host that answered: the DSN's Remote-MTA (RFC 3464 2.3.5), or the host Postfix
 * ("host NAME[IP] said"), Exim ("host NAME [IP]"), sendmail ("while talking to NAME.") or
 * Exchange ("Generating server: NAME") names.
 */
function remoteHost(text: string): string | null {
  const name = '([\\w-]+(?:\\.[\\w-]+)+)';
  return (
    new RegExp(`^Remote-MTA:[ \\t]*(?:dns;[ \\t]*)?${name}`, 'im').exec(text)?.[1] ??
    new RegExp(`\\bhost ${name} ?\\[[\\d.:a-f]+\\]`, 'i').exec(text)?.[1] ??
    new RegExp(`while talking to ${name}\\.?:`, 'i').exec(text)?.[1] ??
    new RegExp(`Generating server: ${name}`, 'i').exec(text)?.[1] ??
    null
  );
}

function smtpCommand(text: string): string | null {
  const m =
    /in reply to (?:end of )?(RCPT|MAIL|DATA|HELO|EHLO)\b/i.exec(text) ??
    /after (RCPT|MAIL|DATA|HELO|EHLO)\b/i.exec(text) ??
    />>> (RCPT|MAIL|DATA|HELO|EHLO)\b/i.exec(text) ??
    /SMTP command:?\s*(RCPT|MAIL|DATA|HELO|EHLO)\b/i.exec(text) ??
    /did not like our (RCPT|MAIL|DATA|final DATA|HELO|EHLO)/i.exec(text) ??
    /\b(RCPT|MAIL) TO\b/.exec(text);
  if (!m) return null;
  const word = (m[1] as string).toUpperCase();
  return word.endsWith('DATA') ? 'DATA' : word;
}

// --- helpers -----------------------------------------------------------------------------------

const MAX_TEXT = 64 * 1024;

/**
 * The readable text of a message: its plain text, or its HTML as text, and any delivery-status
 * part; the raw body when MIME parsing found no text (a multipart report whose parts have no
 * boundaries, as old sendmail and PMDF write them). `report` is what a bounce is read from: the
 * same with the returned message cut off the plain text (RETURNED_MESSAGE), and, when the message
 * has no delivery-status of its own, the one of a report it carries whole (a gateway that wraps
 * the DSN it received in a multipart/mixed with its disclaimer).
 */
function bodyText(mail: ParsedMail, raw: Buffer | undefined): { whole: string; report: string } {
  const parts = mail.attachments ?? [];
  let plain = mail.text?.trim() ? mail.text : typeof mail.html === 'string' ? htmlToText(mail.html, { wordwrap: false }) : '';
  if (!plain.trim() && raw) {
    const head = raw.indexOf('\r\n\r\n') >= 0 ? raw.indexOf('\r\n\r\n') : raw.indexOf('\n\n');
    if (head >= 0) plain = raw.subarray(head).toString('utf8');
  }
  const status = parts
    .filter((p) => p.contentType === 'message/delivery-status' || (p.contentType === 'text/plain' && !p.filename))
    .map((p) => p.content.toString('utf8'));
  const own = parts.some((p) => p.contentType === 'message/delivery-status') || DSN_FIELDS.test(cutOriginal(plain));
  const carried = own ? [] : parts.filter((p) => p.contentType === 'message/rfc822').flatMap((p) => carriedReport(p.content));
  // What a bounce says comes first; the rest (a returned message inline) is not read past MAX_TEXT.
  return {
    whole: [plain, ...status].join('\n\n').slice(0, MAX_TEXT),
    report: [cutOriginal(plain), ...status, ...carried].join('\n\n').slice(0, MAX_TEXT),
  };
}

/**
 * The delivery-status part of a multipart/report carried whole as a message/rfc822 part: the
 * fields between its `Content-Type: message/delivery-status` and the next boundary. A returned
 * message (what the bouncing server sends back) has none: it is the sender's own mail.
 */
function carriedReport(content: Buffer): string[] {
  const text = content.toString('utf8', 0, MAX_TEXT);
  const head = text.split(/\r?\n\r?\n/, 1)[0] ?? '';
  const type = /^Content-Type:[ \t]*multipart\/report[^\n]*(?:\r?\n[ \t][^\n]*)*/im.exec(head)?.[0] ?? '';
  if (!/report-type="?delivery-status/i.test(type)) return [];
  const start = /^Content-Type:[ \t]*message\/delivery-status[^\n]*\n(?:[ \t][^\n]*\n|[\w-]+:[^\n]*\n)*\r?\n/im.exec(text);
  if (!start) return [];
  const rest = text.slice(start.index + start[0].length);
  return [rest.slice(0, /^--/m.exec(rest)?.index ?? rest.length)];
}

function headerObject(mail: ParsedMail, name: string): { value?: string; params?: Record<string, string> } | undefined {
  return mail.headers.get(name) as { value?: string; params?: Record<string, string> } | undefined;
}

function headerText(mail: ParsedMail, name: string): string | undefined {
  const value = mail.headers.get(name);
  if (value === undefined) return undefined;
  if (typeof value === 'object' && value && 'text' in value) return String((value as { text: unknown }).text);
  if (typeof value === 'object' && value && 'value' in value) return String((value as { value: unknown }).value);
  return String(value);
}

function fromAddress(mail: ParsedMail): string {
  return (mail.from?.value?.[0]?.address ?? '').trim().toLowerCase();
}

const OUT_OF_OFFICE =
  /^\s*(auto(matic)?[\s_-]*(reply|response|answer)|out\s+of\s+(the\s+)?office|away\s+from|on\s+vacation|vacation\s+reply|abwesenheit|r[ée]ponse\s+automatique|fuera\s+de\s+la\s+oficina)|\bout of office\b|\bautoreply\b/i;

/** RFC 3834 `Auto-Submitted` other than `no`, `Precedence: bulk|junk|auto_reply`, `X-Autoreply`, `X-Autorespond`, out-of-office subjects. */
function isAutomatic(mail: ParsedMail): boolean {
  const autoSubmitted = headerText(mail, 'auto-submitted')?.trim().toLowerCase();
  if (autoSubmitted && autoSubmitted !== 'no') return true;
  if (/^(bulk|junk|auto_reply)$/i.test(headerText(mail, 'precedence')?.trim() ?? '')) return true;
  for (const name of ['x-autoreply', 'x-autorespond', 'x-autoresponse', 'x-autogenerated', 'x-auto-response-suppress']) {
    if (headerText(mail, name) !== undefined) return true;
  }
  return OUT_OF_OFFICE.test(mail.subject ?? '');
}
