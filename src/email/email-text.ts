import { compile } from 'html-to-text';

// Compiled once: `convert` compiles its options on every call, which costs far more than the
// conversion itself (it was most of the CPU of sending an email).
const toText = compile({
  wordwrap: false,
  selectors: [
    { selector: 'a', options: { hideLinkHrefIfSameAsText: true } },
    { selector: 'img', format: 'skip' },
  ],
});

/** Plain text of email HTML: links keep their address, no hard wrapping (mail clients wrap). */
export function htmlToText(html: string): string {
  return toText(html).trim();
}

/**
 * The `text` of a templated email: greeting (the form without a first name, as no contact is
 * known yet), body, closing with the signature under it, and the P.S. line — paragraphs apart.
 */
export function renderEmailText(
  parts: { greeting_without_first_name: string; body: string; closing: string; ps_line: string },
  signatureHtml: string | null,
): string {
  const closing = [parts.closing.trim(), signatureHtml ? htmlToText(signatureHtml) : ''].filter(Boolean).join('\n');
  const ps = parts.ps_line.trim() ? `P.S. ${parts.ps_line.trim()}` : '';
  return [parts.greeting_without_first_name.trim(), htmlToText(parts.body), closing, ps].filter(Boolean).join('\n\n');
}
