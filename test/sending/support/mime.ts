/**
 * Just enough MIME to read what Hopper sends: headers (unfolded, RFC 2047 words decoded), and the
 * leaf parts of a multipart message with quoted-printable or base64 bodies decoded.
 */
export interface MimePart {
  headers: Map<string, string>;
  contentType: string;
  body: string;
}

export interface ParsedEmail extends MimePart {
  parts: MimePart[];
  /** The text/plain and text/html leaf parts (undefined when missing). */
  text: string | undefined;
  html: string | undefined;
}

export function messageIdOf(raw: string): string {
  return splitHead(raw).headers.get('message-id') ?? '';
}

export function parseEmail(raw: string): ParsedEmail {
  const root = parsePart(raw);
  const parts = leaves(root);
  const find = (type: string) => parts.find((p) => p.contentType === type)?.body;
  return { ...root, parts, text: find('text/plain'), html: find('text/html') };
}

function splitHead(raw: string): { headers: Map<string, string>; body: string } {
  const text = raw.replace(/\r\n/g, '\n');
  const cut = text.indexOf('\n\n');
  const head = cut < 0 ? text : text.slice(0, cut);
  const body = cut < 0 ? '' : text.slice(cut + 2);
  const headers = new Map<string, string>();
  for (const line of head.replace(/\n[ \t]+/g, ' ').split('\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), decodeWords(line.slice(colon + 1).trim()));
  }
  return { headers, body };
}

function parsePart(raw: string): MimePart & { rawBody: string } {
  const { headers, body } = splitHead(raw);
  const contentType = (headers.get('content-type') ?? 'text/plain').split(';')[0]?.trim().toLowerCase() ?? 'text/plain';
  return { headers, contentType, body: decodeBody(body, headers.get('content-transfer-encoding')), rawBody: body };
}

function leaves(part: MimePart & { rawBody: string }): MimePart[] {
  if (!part.contentType.startsWith('multipart/')) return [part];
  const boundary = /boundary="?([^";]+)"?/i.exec(part.headers.get('content-type') ?? '')?.[1];
  if (!boundary) return [];
  const sections = part.rawBody.split(`--${boundary}`).slice(1);
  const out: MimePart[] = [];
  for (const section of sections) {
    if (section.startsWith('--')) break;
    // The line break before a delimiter belongs to the delimiter (RFC 2046).
    const child = parsePart(section.replace(/^\n/, '').replace(/\n$/, ''));
    out.push(...leaves(child));
  }
  return out;
}

function decodeBody(body: string, encoding: string | undefined): string {
  switch (encoding?.toLowerCase()) {
    case 'quoted-printable':
      return Buffer.from(
        body.replace(/=\n/g, '').replace(/=([0-9A-F]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))),
        'latin1',
      ).toString('utf8');
    case 'base64':
      return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
    default:
      return body;
  }
}

/** RFC 2047 encoded words: `=?UTF-8?Q?…?=` and `=?UTF-8?B?…?=`. */
function decodeWords(value: string): string {
  return value.replace(/=\?([^?]+)\?([QB])\?([^?]*)\?=(\s+(?==\?))?/gi, (_, _charset: string, kind: string, text: string) => {
    if (kind.toUpperCase() === 'B') return Buffer.from(text, 'base64').toString('utf8');
    const bytes = text.replace(/_/g, ' ').replace(/=([0-9A-F]{2})/gi, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
    return Buffer.from(bytes, 'latin1').toString('utf8');
  });
}
