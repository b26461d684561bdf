import { createHash } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import { renderView } from './render.ts';

/**
 * The pages behind an email's unsubscribe link (views/unsubscribe.eta): self-contained (no session,
 * no shared assets), one inline style allowed by its hash, nothing else — and never cached, indexed or leaking the
 * token-bearing URL as a referrer.
 */
const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;color:#1f2328;max-width:34rem;margin:4rem auto;padding:0 1rem}' +
  'button{font:inherit;padding:.5rem 1.25rem;border:0;border-radius:6px;background:#1f6feb;color:#fff;cursor:pointer}';
const CSP = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`,
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

export type UnsubscribeView =
  /** The GET page: a button that POSTs the one-click form to `action`. */
  { kind: 'confirm'; action: string } | { kind: 'done' } | { kind: 'already' } | { kind: 'invalid' };

const TEXT: Record<UnsubscribeView['kind'], { title: string; text: string }> = {
  confirm: { title: 'Unsubscribe?', text: 'You will no longer receive these emails at this address.' },
  done: { title: 'You are unsubscribed', text: 'You will no longer receive these emails at this address.' },
  already: { title: 'You are already unsubscribed', text: 'This address no longer receives these emails.' },
  invalid: {
    title: 'This link is not valid',
    text: 'The unsubscribe link is incomplete or was changed. Use the link in the email itself.',
  },
};

export function sendUnsubscribePage(reply: FastifyReply, status: number, view: UnsubscribeView): FastifyReply {
  const { title, text } = TEXT[view.kind];
  const html = renderView('unsubscribe', { title, text, style: STYLE, action: view.kind === 'confirm' ? view.action : undefined });
  return reply
    .code(status)
    .headers({
      'Cache-Control': 'no-store',
      'Content-Security-Policy': CSP,
      'Referrer-Policy': 'no-referrer',
      'X-Robots-Tag': 'noindex',
      'X-Content-Type-Options': 'nosniff',
    })
    .type('text/html; charset=utf-8')
    .send(html);
}
