import {
  COX_CODES,
  COX_PHRASES,
  EXCHANGE_ONLINE,
  FRANCE_PTT_CODES,
  GODADDY_CODES,
  GODADDY_PHRASES,
  GOOGLE_APPS,
  IUA_CODES,
  MIMECAST,
  SPECTRUM_CODES,
  SPECTRUM_RANGES,
  TENCENT_QQ,
} from './bounce-rhost-tables.ts';

/**
 * The reason a large provider's server gives in its own terms, told by the remote host that
 * answered (Sisimai::Rhost: consulted before the general patterns, and its answer kept when it
 * has one). Each reader is the `get` of the Sisimai::Rhost module it is named after; the tables
 * are bounce-rhost-tables.ts. An empty string: the host is none of these, or its words name no
 * reason of its own.
 */
interface HostFacts {
  /** The remote host's name (`mx1.example.cox.net`), as the report gives it. */
  host: string;
  status: string | null;
  replyCode: string | null;
  command: string | null;
  /** The server's words, as it wrote them. */
  diagnostic: string;
}

type Reader = (f: HostFacts) => string;

const firstPhrase = (phrases: Record<string, readonly string[]>, text: string) =>
  Object.keys(phrases).find((reason) => phrases[reason]?.some((p) => text.includes(p))) ?? '';

const cox: Reader = (f) => {
  const code = /AUP#([0-9A-Z]+)/.exec(f.diagnostic)?.[1];
  return (code && COX_CODES[code]) || firstPhrase(COX_PHRASES, f.diagnostic);
};

const exchangeOnline: Reader = (f) => {
  const status = f.status ?? '';
  const third = Number(status.split('.').at(-1));
  const words = f.diagnostic.toLowerCase();
  for (const [reason, rows] of Object.entries(EXCHANGE_ONLINE)) {
    for (const [code, least, most, phrase] of rows) {
      const fits = least === most ? status === code : status.includes(code) && third >= least && third <= most;
      if (fits && words.includes(phrase)) return reason;
    }
  }
  return '';
};

const francePtt: Reader = (f) => {
  const m = /\b(LPN|LPNAAA|OFR|OUK)(_[0-9]{3}|[0-9]{3}[-_][0-9]{3})\b/i.exec(f.diagnostic);
  if (!m) return '';
  return FRANCE_PTT_CODES[`${m[1]}${m[2]}`.slice(-3)] ?? 'undefined';
};

const goDaddy: Reader = (f) => {
  const code = /\s(IB\d{3})\b/.exec(f.diagnostic)?.[1];
  if (code) return GODADDY_CODES[code] ?? '';
  return firstPhrase(GODADDY_PHRASES, f.diagnostic);
};

const googleApps: Reader = (f) => {
  const words = f.diagnostic.toLowerCase();
  const reply = (f.replyCode ?? '').slice(1, 3);
  const status = (f.status ?? '').slice(2);
  for (const [reason, rows] of Object.entries(GOOGLE_APPS)) {
    for (const [code, dsn, phrase] of rows) {
      if (words.includes(phrase) && reply && code.indexOf(reply) > 0 && status && dsn.indexOf(status) > 1) return reason;
    }
  }
  return '';
};

const iua: Reader = (f) => IUA_CODES[/[.]i[.]ua\/err\/(\d+)/.exec(f.diagnostic.toLowerCase())?.[1] ?? ''] ?? '';

const mimecast: Reader = (f) => {
  const words = f.diagnostic.toLowerCase();
  const reply = Number(f.replyCode ?? 0);
  for (const [reason, rows] of Object.entries(MIMECAST)) {
    if (rows.some(([code, phrase]) => code === reply && words.includes(phrase))) return reason;
  }
  return '';
};

const spectrum: Reader = (f) => {
  const code = Number(/AUP#[-A-Za-z]*(\d{4})/.exec(f.diagnostic)?.[1] ?? 0);
  return SPECTRUM_CODES[String(code)] ?? SPECTRUM_RANGES.find(([least, most]) => code >= least && code <= most)?.[2] ?? '';
};

const tencentQq: Reader = (f) => {
  const words = f.diagnostic.toLowerCase();
  const phrase = Object.keys(TENCENT_QQ).find((p) => words.includes(p));
  return phrase ? (TENCENT_QQ[phrase] as string) : '';
};

/** Sisimai::Rhost's RhostClass: which reader a remote host's name calls for. */
const HOSTS: readonly [RegExp, Reader][] = [
  [/cox[.]net/, cox],
  [/[.](?:prod|protection)[.]outlook[.]com$/, exchangeOnline],
  [/\b(?:laposte[.]net|(?:orange|wanadoo)[.]fr)$/, francePtt],
  [/^(?:smtp|mailstore1)[.]secureserver[.]net$/, goDaddy],
  [/(?:aspmx|gmail-smtp-in)[.]l[.]google[.]com$/, googleApps],
  [/[.]email[.]ua$/, iua],
  [/[.]mimecast[.]com$/, mimecast],
  [/charter[.]net/, spectrum],
  [/mx[0-9]+[.]qq[.]com$/, tencentQq],
];

export function hostReason(f: HostFacts): string {
  const host = f.host.toLowerCase().replace(/[.]$/, '');
  const reader = HOSTS.find(([pattern]) => pattern.test(host))?.[1];
  return reader ? reader(f) : '';
}
