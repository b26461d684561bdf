import type { ParsedMail } from 'mailparser';

/**
 * What a bounce's words mean in the format of the MTA that wrote it: the per-reason phrases of
 * Sisimai 4.25's lhost modules (`$messagesof` / `$refailures` of Sisimai::Lhost::*, Debian's
 * `libsisimai-perl`), each module told by the headers its `make` checks first (its From, Subject,
 * X- headers, Received lines or Message-ID), tried in Sisimai::Order's spirit: the specific
 * servers before the general qmail and Exim forms. A phrase is a substring, matched as the module
 * does (case kept), or a pattern. A reason found so is the MTA's own word for the failure
 * (bounce-reason.ts decides how it combines with the rest).
 *
 * Copyright (C) 2014-2020 azumakuniyuki and sisimai development team, all rights reserved.
 * Redistribution and use in source and binary forms, with or without modification, are permitted
 * provided that the following conditions are met: 1. Redistributions of source code must retain the
 * above copyright notice, this list of conditions and the following disclaimer. 2. Redistributions
 * in binary form must reproduce the above copyright notice, this list of conditions and the
 * following disclaimer in the documentation and/or other materials provided with the distribution.
 * THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND ANY EXPRESS OR
 * IMPLIED WARRANTIES ARE DISCLAIMED (the BSD 2-Clause licence).
 */
interface Head {
  from: string;
  subject: string;
  received: string[];
  has(name: string): boolean;
  get(name: string): string;
}

interface Lhost {
  name: string;
  detect: (h: Head) => boolean;
  phrases: Record<string, readonly (string | RegExp)[]>;
}

const LHOSTS: readonly Lhost[] = [
  {
    name: 'Amavis',
    detect: (h) => h.from.startsWith('"Content-filter at '),
    phrases: {
      contenterror: [' - bad header:'],
      exceedlimit: [' - message size exceeds recipient'],
      spamdetected: [' - spam'],
      systemerror: [
        ' - temporary mta failure on relaying',
        ' - rejected by next-hop mta on relaying',
        ' - unable to relay message back to mta',
      ],
      virusdetected: [' - infected'],
    },
  },
  {
    name: 'Aol',
    detect: (h) => h.has('x-aol-ip'),
    phrases: { hostunknown: ['Host or domain name not found'], notaccept: ['type=MX: Malformed or unexpected name server reply'] },
  },
  {
    name: 'Biglobe',
    detect: (h) => /postmaster[@](?:biglobe|inacatv|tmtv|ttv)[.]ne[.]jp/.test(h.from) && h.subject.startsWith('Returned mail:'),
    phrases: {
      filtered: ['Mail Delivery Failed... User unknown'],
      mailboxfull: ["The number of messages in recipient's mailbox exceeded the local limit."],
    },
  },
  {
    name: 'Courier',
    detect: (h) =>
      h.from.includes('Courier mail server at ') ||
      /(?:NOTICE: mail delivery status[.]|WARNING: delayed mail[.])/.test(h.subject) ||
      /^<courier[.][0-9A-F]+[.]/.test(h.get('message-id')),
    phrases: {
      hostunknown: ['No such domain.'],
      networkerror: ['DNS lookup failed.'],
      systemerror: ["This domain's DNS violates RFC 1035."],
    },
  },
  {
    name: 'Domino',
    detect: (h) => /^DELIVERY(?:[ ]|_)FAILURE:/.test(h.subject),
    phrases: {
      filtered: ['Cannot route mail to user'],
      systemerror: ['Several matches found in Domino Directory'],
      userunknown: [
        'not listed in Domino Directory',
        'not listed in public Name & Address Book',
        "non répertorié dans l'annuaire Domino",
        'Domino ディレクトリには見つかりません',
      ],
    },
  },
  {
    name: 'EZweb',
    detect: (h) =>
      /Postmaster@(ezweb\.ne\.jp|au\.com)/.test(h.from) ||
      h.subject === 'Mail System Error - Returned Mail' ||
      h.get('message-id').endsWith('.ezweb.ne.jp>'),
    phrases: {
      expired: [/Your message was not delivered within /],
      mailboxfull: [/The user[(]s[)] account is temporarily over quota/],
      suspend: [/The user[(]s[)] account is disabled[.]/, /The user[(]s[)] account is temporarily limited[.]/],
    },
  },
  {
    name: 'GSuite',
    detect: (h) =>
      h.from.includes('<mailer-daemon@googlemail.com>') &&
      h.subject.includes('Delivery Status Notification') &&
      h.has('x-gm-message-state'),
    phrases: {
      networkerror: [' had no relevant answers.', ' responded with code NXDOMAIN'],
      notaccept: ['Null MX'],
      userunknown: ["because the address couldn't be found. Check for typos or unnecessary spaces and try again."],
    },
  },
  {
    name: 'Gmail',
    detect: (h) => h.from.includes('<mailer-daemon@googlemail.com>') && h.subject.includes('Delivery Status Notification'),
    phrases: {
      expired: [
        'DNS Error: Could not contact DNS servers',
        'Delivery to the following recipient has been delayed',
        'The recipient server did not accept our requests to connect',
      ],
      hostunknown: ['DNS Error: Domain name not found', 'DNS Error: DNS server returned answer with no data'],
    },
  },
  {
    name: 'IMailServer',
    detect: (h) => /^Undeliverable Mail[ ]*$/.test(h.subject) || h.get('x-mailer').startsWith('<SMTP32 v'),
    phrases: {
      expired: [/^Delivery failed \d+ attempts/m],
      hostunknown: [/Unknown host/],
      mailboxfull: [/^User mailbox exceeds allowed size/m],
      userunknown: [/^(?:Unknown user|Invalid final delivery userid)/m],
      virusdetected: [/^Requested action not taken: virus detected/m],
    },
  },
  {
    name: 'KDDI',
    detect: (h) =>
      /no-reply[@].+[.]dion[.]ne[.]jp/.test(h.from) ||
      h.get('reply-to') === 'no-reply@app.auone-net.jp' ||
      h.received.some((r) => r.includes('ezweb.ne.jp (') || r.includes('.au.com (')),
    phrases: {
      hostunknown: ['As the remote domain doesnt exist'],
      mailboxfull: ['As their mailbox is full'],
      norelaying: ['Due to the following SMTP relay error'],
    },
  },
  {
    name: 'MXLogic',
    detect: (h) => h.has('x-mx-bounce') || h.has('x-mxl-hash') || h.has('x-mxl-notehash'),
    phrases: {
      contenterror: ['Too many "Received" headers'],
      hostunknown: [
        'all host address lookups failed permanently',
        'all relevant MX records point to non-existent hosts',
        'Unrouteable address',
      ],
      mailboxfull: ['mailbox is full', 'error: quota exceed'],
      notaccept: ['an MX or SRV record indicated no SMTP service', 'no host found for existing SMTP connection'],
      syntaxerror: [
        'angle-brackets nested too deep',
        'expected word or "<"',
        'domain missing in source-routed address',
        'malformed address:',
      ],
      systemerror: ['delivery to file forbidden', 'delivery to pipe forbidden', 'local delivery failed', 'LMTP error after '],
      userunknown: ['user not found'],
    },
  },
  {
    name: 'MailRu',
    detect: (h) => /<?mailer-daemon[@].*mail[.]ru>?/i.test(h.from) && /[.](?:mail[.]ru|smailru[.]net)>$/.test(h.get('message-id')),
    phrases: {
      contenterror: ['Too many "Received" headers '],
      expired: ['retry timeout exceeded', 'No action is required on your part'],
      hostunknown: [
        'all host address lookups failed permanently',
        'all relevant MX records point to non-existent hosts',
        'Unrouteable address',
      ],
      mailboxfull: ['mailbox is full', 'error: quota exceed'],
      notaccept: ['an MX or SRV record indicated no SMTP service', 'no host found for existing SMTP connection'],
      systemerror: ['delivery to file forbidden', 'delivery to pipe forbidden', 'local delivery failed'],
      userunknown: ['user not found'],
    },
  },
  {
    name: 'McAfee',
    detect: (h) => h.get('x-nai-header').includes('Modified by McAfee') && h.subject === 'Delivery Status',
    phrases: {
      userunknown: [
        /(?: User [(].+[@].+[)] unknown[.] |550 Unknown user [^ ]+[@][^ ]+|550 [<].+?[@].+?[>][.]+ User not exist|No such user)/,
      ],
    },
  },
  {
    name: 'MessageLabs',
    detect: (h) => h.has('x-msg-ref') && h.from.includes('MAILER-DAEMON@messagelabs.com') && h.subject.startsWith('Mail Delivery Failure'),
    phrases: {
      securityerror: [/Please turn on SMTP Authentication in your mail client/],
      userunknown: [/(?:542 .+ Rejected|No such user)/],
    },
  },
  {
    name: 'Notes',
    detect: (h) => h.subject.startsWith('Undeliverable message'),
    phrases: {
      networkerror: ['Message has exceeded maximum hop count'],
      userunknown: ['User not listed in public Name & Address Book', 'ディレクトリのリストにありません'],
    },
  },
  {
    name: 'OpenSMTPD',
    detect: (h) =>
      h.subject.includes('Delivery status notification') &&
      h.from.includes('Mailer Daemon <') &&
      h.received.some((r) => r.includes(' (OpenSMTPD) with ')),
    phrases: {
      expired: ['Envelope expired'],
      hostunknown: ['Invalid domain name', 'Domain does not exist'],
      networkerror: [
        'Address family mismatch on destination MXs',
        'All routes to destination blocked',
        'bad DNS lookup error code',
        'Could not retrieve source address',
        'Loop detected',
        'Network error on destination MXs',
        'No MX found for domain',
        'No MX found for destination',
        'No valid route to remote MX',
        'No valid route to destination',
        'Temporary failure in MX lookup',
      ],
      notaccept: ['Destination seem to reject all mails'],
      securityerror: ['Could not retrieve credentials'],
    },
  },
  {
    name: 'Outlook',
    detect: (h) =>
      [
        h.subject.includes('Delivery Status Notification'),
        h.has('x-message-delivery'),
        h.has('x-message-info'),
        h.received.some((r) => r.includes('.hotmail.com')),
      ].filter(Boolean).length >= 2,
    phrases: {
      hostunknown: ['The mail could not be delivered to the recipient because the domain is not reachable'],
      userunknown: ['Requested action not taken: mailbox unavailable'],
    },
  },
  {
    name: 'ReceivingSES',
    detect: (h) => h.has('x-ses-outgoing'),
    phrases: {
      contenterror: ['Message content rejected'],
      filtered: ['Mailbox does not exist'],
      mailboxfull: ['Mailbox full'],
      mesgtoobig: ['Message too large'],
    },
  },
  {
    name: 'Exim',
    detect: (h) =>
      !/[@].+[.]mail[.]ru[>]?/.test(h.from) &&
      [
        h.from.startsWith('Mail Delivery System'),
        /^<\w{7}-\w{6}-\w{2}@/.test(h.get('message-id')),
        /^(?:Mail delivery failed(:[ ]returning message to sender)?|Warning: message [^ ]+ delayed[ ]+|Delivery Status Notification)/.test(
          h.subject,
        ),
      ].filter(Boolean).length >= 2,
    phrases: {
      contenterror: ['Too many "Received" headers'],
      hostunknown: [
        'all host address lookups failed permanently',
        'all relevant MX records point to non-existent hosts',
        'Unrouteable address',
      ],
      mailboxfull: ['mailbox is full', 'error: quota exceed'],
      notaccept: ['an MX or SRV record indicated no SMTP service', 'no host found for existing SMTP connection'],
      syntaxerror: [
        'angle-brackets nested too deep',
        'expected word or "<"',
        'domain missing in source-routed address',
        'malformed address:',
      ],
      systemerror: ['delivery to file forbidden', 'delivery to pipe forbidden', 'local delivery failed', 'LMTP error after '],
      userunknown: ['user not found'],
    },
  },
  {
    name: 'qmail',
    detect: (h) =>
      h.subject === 'failure notice' ||
      h.received.some((r) => /^[(]qmail[ ]+\d+[ ]+invoked[ ]+(?:for[ ]+bounce|from[ ]+network)[)]/.test(r)),
    phrases: {
      hostunknown: ["Sorry, I couldn't find any host "],
      mailboxfull: ['disk quota exceeded'],
      mesgtoobig: ['Message size exceeds fixed maximum message size:'],
      networkerror: [
        "Sorry, I wasn't able to establish an SMTP connection",
        "Sorry, I couldn't find a mail exchanger or IP address",
        "Sorry. Although I'm listed as a best-preference MX or A for that host",
      ],
      systemerror: ['bad interpreter: No such file or directory', 'system error', 'Unable to'],
      systemfull: ['Requested action not taken: mailbox unavailable (not enough free space)'],
      userunknown: ['no mailbox here by that name', 'does not like recipient.'],
    },
  },
  {
    name: 'X4',
    detect: (h) =>
      h.subject.startsWith('failure notice') ||
      h.subject.startsWith('Permanent Delivery Failure') ||
      h.received.some((r) => /^[(]qmail[ ]+\d+[ ]+invoked[ ]+for[ ]+bounce[)]/.test(r)),
    phrases: {
      hostunknown: ["Sorry, I couldn't find any host "],
      mailboxfull: ['disk quota exceeded'],
      mesgtoobig: ['Message size exceeds fixed maximum message size:'],
      networkerror: [
        "Sorry, I wasn't able to establish an SMTP connection",
        "Sorry, I couldn't find a mail exchanger or IP address",
        "Sorry. Although I'm listed as a best-preference MX or A for that host",
      ],
      systemerror: ['bad interpreter: No such file or directory', 'system error', 'Unable to'],
      systemfull: ['Requested action not taken: mailbox unavailable (not enough free space)'],
      userunknown: ['no mailbox here by that name', 'does not like recipient.'],
    },
  },
];

function headOf(mail: ParsedMail): Head {
  const text = (name: string): string => {
    const line = mail.headerLines?.find((l) => l.key === name)?.line;
    return line
      ? line
          .slice(line.indexOf(':') + 1)
          .replace(/\r?\n[ \t]+/g, ' ')
          .trim()
      : '';
  };
  return {
    from: text('from'),
    subject: mail.subject ?? '',
    received: (mail.headerLines ?? []).filter((l) => l.key === 'received').map((l) => l.line.replace(/^received:\s*/i, '')),
    has: (name) => mail.headers.has(name),
    get: text,
  };
}

/** The MTA that wrote the bounce, when its headers tell, and the reason its own phrases give the words. */
export function lhostReason(mail: ParsedMail, words: string): { mta: string; reason: string } | undefined {
  const head = headOf(mail);
  const lhost = LHOSTS.find((l) => l.detect(head));
  if (!lhost) return undefined;
  for (const [reason, phrases] of Object.entries(lhost.phrases)) {
    if (phrases.some((p) => (typeof p === 'string' ? words.includes(p) : p.test(words)))) return { mta: lhost.name, reason };
  }
  return undefined;
}
