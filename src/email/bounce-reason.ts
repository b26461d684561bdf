import { REASON_PATTERNS, STATUS_REASON } from './bounce-patterns.ts';
import { hostReason } from './bounce-rhost.ts';

/**
 * Why a delivery failed, from what the bouncing server said: its DSN status (`5.1.1`), SMTP reply
 * code (`550`), the SMTP command it answered and its words. The reasons and the order in which
 * they are tried are Sisimai's (libsisimai.org): the words decide first, the status when the words
 * say nothing known. A reason is `hard` only when the address itself is bad (user or host
 * unknown, moved, not accepting mail): every other reason — a full mailbox, a block, a policy or
 * authentication (DMARC, SPF) refusal, spam, an expiry — is soft.
 */
interface FailureFacts {
  status: string | null;
  replyCode: string | null;
  command: string | null;
  diagnostic: string;
  action: string | null;
  /** The remote host that answered, when the report names it (bounce-rhost.ts). */
  host?: string | null;
  /** The reason the bouncing MTA's own phrases give (inbound/bounce-lhost.ts). */
  mtaReason?: string | null;
}

const HARD_REASONS = new Set(['userunknown', 'hostunknown', 'hasmoved', 'notaccept']);

export function isHardReason(reason: string): boolean {
  return HARD_REASONS.has(reason);
}

/** Hopper's classification of each reason (docs/outcomes.md, "Email outcomes"). */
const CLASSIFICATIONS: Record<string, string> = {
  userunknown: 'user_unknown',
  hostunknown: 'host_unknown',
  hasmoved: 'has_moved',
  notaccept: 'not_accepting',
  mailboxfull: 'mailbox_full',
  suspend: 'suspended',
  expired: 'expired',
  filtered: 'filtered',
  rejected: 'rejected',
  blocked: 'blocked',
  authfailure: 'auth_failure',
  policyviolation: 'policy',
  spamdetected: 'spam',
  virusdetected: 'virus',
  securityerror: 'security',
  contenterror: 'content',
  mesgtoobig: 'too_big',
  exceedlimit: 'too_big',
  toomanyconn: 'rate_limited',
  norelaying: 'relay_denied',
  systemerror: 'system_error',
  systemfull: 'system_full',
  mailererror: 'system_error',
  networkerror: 'network_error',
  syntaxerror: 'protocol_error',
};

export function classificationOf(reason: string): string {
  return CLASSIFICATIONS[reason] ?? 'undetermined';
}

const MAX_WORDS = 1000;

/** Reasons whose status name is worth a second look at the words. */
const RETRIED = new Set(['undefined', 'onhold', 'systemerror', 'securityerror', 'networkerror', 'hostunknown', 'userunknown']);

const FIRST_ORDER = [
  'mailboxfull',
  'mesgtoobig',
  'exceedlimit',
  'suspend',
  'hasmoved',
  'norelaying',
  'userunknown',
  'filtered',
  'rejected',
  'hostunknown',
  'spamdetected',
  'toomanyconn',
  'blocked',
] as const;
const SECOND_ORDER = [
  'mailboxfull',
  'spamdetected',
  'policyviolation',
  'virusdetected',
  'norelaying',
  'securityerror',
  'systemerror',
  'networkerror',
  'suspend',
  'expired',
  'contenterror',
  'systemfull',
  'notaccept',
  'mailererror',
] as const;

/** Words Sisimai's per-server parsers know, which its shared patterns lack. */
const MORE: Record<string, RegExp> = {
  userunknown: /not listed in (domino directory|public name & address book)|no valid recipients|ディレクトリのリストにありません/,
  blocked: /spamhaus\.org|\bblocklist|\bdnsbl\b/,
  hostunknown: /dns lookup failure: host [^ ]+ not found|host or domain name not found|domain (does not exist|not found)/,
};

/** Whether the (lower-cased) words are of this reason. */
function matches(reason: string, text: string): boolean {
  if (MORE[reason]?.test(text)) return true;
  const p = REASON_PATTERNS[reason];
  if (!p) return false;
  if (p.isnot?.some((s) => text.includes(s))) return false;
  if (p.index?.some((s) => text.includes(s))) return true;
  return p.regex?.test(text) ?? false;
}

function statusReason(status: string | null): string {
  return status ? (STATUS_REASON[status] ?? '') : '';
}

/** The sender's authentication failed (SPF, DKIM, DMARC): RFC 7372's codes and the words around them. */
const AUTH_STATUSES = new Set([
  '5.7.20',
  '5.7.21',
  '5.7.22',
  '5.7.23',
  '5.7.24',
  '5.7.26',
  '4.7.20',
  '4.7.21',
  '4.7.22',
  '4.7.23',
  '4.7.24',
  '4.7.26',
]);
const AUTH_FAILURE =
  /\b(dmarc|spf|dkim)\b[^.;]{0,60}?\b(fail|failed|failure|reject|rejected|policy|not pass|unauthenticated)|(does not|did not|doesn't) pass (dmarc|spf|dkim)|unauthenticated (email|mail|sender)/;

/** Sisimai's per-reason test of a failure (`Sisimai::Reason::*->true`). */
function isReason(reason: (typeof FIRST_ORDER)[number], f: FailureFacts, diagnostic: string): boolean {
  const named = statusReason(f.status);
  const command = f.command ?? '';
  switch (reason) {
    case 'mailboxfull':
    case 'exceedlimit':
    case 'toomanyconn':
    case 'blocked':
      return named === reason || matches(reason, diagnostic);
    case 'mesgtoobig':
      if (named === 'mesgtoobig') return true;
      if (named === 'exceedlimit' || f.status === '5.2.3') return false;
      return matches(reason, diagnostic);
    case 'suspend':
    case 'hasmoved':
      return matches(reason, diagnostic);
    case 'norelaying':
      return !/^(CONN|EHLO|HELO)$/.test(command) && matches(reason, diagnostic);
    case 'userunknown':
      if (named === 'suspend') return false;
      if (named === 'userunknown') {
        return !['norelaying', 'blocked', 'mailboxfull', 'hasmoved', 'rejected', 'notaccept'].some((r) => matches(r, diagnostic));
      }
      // Sisimai::Reason::UserUnknown asks for an answer to RCPT; its lhost modules know the command
      // of more formats than Hopper reads, so only an answer to DATA rules it out here.
      return command !== 'DATA' && matches('userunknown', diagnostic);
    case 'filtered':
      if (named === 'suspend') return false;
      if (named === 'filtered') return matches('userunknown', diagnostic) || matches('filtered', diagnostic);
      // Sisimai::Reason::Filtered: "user unknown" said after DATA (m-FILTER's content filter
      // answering for the mailbox) is the filter's verdict.
      if (/^(CONN|EHLO|HELO|MAIL|RCPT)$/.test(command)) return false;
      return matches('filtered', diagnostic) || matches('userunknown', diagnostic);
    case 'rejected': {
      const temp = named || 'undefined';
      if (temp === 'rejected') return true;
      if (command === 'MAIL') return matches(reason, diagnostic);
      if (command === 'DATA') return temp !== 'userunknown' && matches(reason, diagnostic);
      return /^(onhold|undefined|securityerror|systemerror)$/.test(temp) && matches(reason, diagnostic);
    }
    case 'hostunknown':
      if (named === 'hostunknown') return !matches('networkerror', diagnostic);
      return matches(reason, diagnostic);
    case 'spamdetected':
      if (named === 'spamdetected') return true;
      if (/^(CONN|EHLO|HELO|MAIL|RCPT)$/.test(command)) return false;
      return matches(reason, diagnostic);
  }
}

/** The reason of one failure (`Sisimai::Reason->get`). */
export function failureReason(f: FailureFacts): string {
  if (f.status?.startsWith('2.')) return 'delivered';
  // As Sisimai::Fact: the reason the MTA's format gave stands, unless it is one Sisimai::Reason
  // retries (an unknown user, a system error…); then the provider's own codes (Sisimai::Rhost),
  // then Sisimai::Reason, where the MTA's reason holds at its own place in the order.
  if (f.mtaReason && !RETRIED.has(f.mtaReason)) return f.mtaReason;
  const byHost = f.host ? hostReason({ ...f, host: f.host, diagnostic: f.diagnostic.slice(0, MAX_WORDS) }) : '';
  if (byHost) return byHost;
  // A server's words are a few lines; the patterns are read on at most MAX_WORDS of them (some of
  // Sisimai's patterns backtrack heavily on long runs without spaces: a message crafted so must
  // not hold the receiver).
  const diagnostic = f.diagnostic.slice(0, MAX_WORDS).toLowerCase().replace(/\s+/g, ' ');
  if ((f.status && AUTH_STATUSES.has(f.status)) || AUTH_FAILURE.test(diagnostic)) return 'authfailure';
  for (const reason of FIRST_ORDER) if (f.mtaReason === reason || isReason(reason, f, diagnostic)) return reason;
  if (f.mtaReason) return f.mtaReason;

  let reason = statusReason(f.status);
  if (reason === '' || reason === 'expired' || RETRIED.has(reason)) {
    const found = SECOND_ORDER.find((r) => matches(r, diagnostic));
    if (found) return found;
    const klass = f.status?.slice(0, 3) ?? '';
    if (klass === '5.6' || klass === '4.6') return 'contenterror';
    if (klass === '5.7' || klass === '4.7') return 'securityerror';
    if (f.replyCode && /^[45]0[0-7]$/.test(f.replyCode)) return 'syntaxerror';
    if (f.action && /^(delayed|expired)/.test(f.action)) return 'expired';
    if (f.command === 'EHLO' || f.command === 'HELO') return 'blocked';
  }
  if (reason && reason !== 'undefined') return reason;
  if (f.action === 'delayed') return 'expired';
  if (matches('vacation', diagnostic)) return 'vacation';
  reason = diagnostic.trim() ? 'onhold' : 'undefined';
  return reason;
}

/** A DSN status in free text (`550 5.1.1`, `#5.1.1`, `5.1.1`), not part of an IPv4 address (`Sisimai::SMTP::Status->find`). */
export function findStatus(whole: string): string | null {
  const text = whole.slice(0, 10 * MAX_WORDS);
  for (const pattern of [/ ?\(#([45]\.\d\.\d+)\)? ?/, /\b\d{3}[ -]#?([45]\.\d\.\d+)\b/, /\b([45]\.\d\.\d+)\b/, /\b(2\.[0-7]\.[0-7])\b/]) {
    const found = pattern.exec(text)?.[1];
    if (!found) continue;
    const escaped = found.replace(/\./g, '\\.');
    if (new RegExp(`\\b(?:${escaped}\\.\\d{1,3}|\\d{1,3}\\.${escaped})\\b`).test(text)) continue;
    // A version number (`X-Mailman-Version: 2.1.5`, `Postfix 3.4.1`) is no status.
    if (new RegExp(`(version:?|\\bv)\\s*${escaped}\\b`, 'i').test(text)) continue;
    return found;
  }
  return null;
}
