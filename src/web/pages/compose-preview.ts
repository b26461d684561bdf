import type { AppContext } from '../../app-context.ts';
import { findContact, searchContacts } from '../../contacts/contacts.ts';
import type { Db } from '../../db/database.ts';
import { sanitizeEmailHtml } from '../../email/email-html.ts';
import { escapeHtml, previewEmail } from '../../email/render.ts';
import { senderIdentity } from '../../email/sender-identity.ts';
import { findSignatureBody } from '../../email/signatures.ts';
import type { App } from '../../http/fastify-types.ts';
import { findSenderFields } from '../../identity/users.ts';
import { PAGE_SCHEMA, sendSandboxed } from '../render.ts';
import { toSignIn } from '../viewer.ts';

const TEXT = ['subject', 'greeting_with_first_name', 'greeting_without_first_name', 'closing', 'ps_line'] as const;

/** The contact a preview is written for: the first contact ticked as a recipient, else the user's first contact; none without any. */
async function sampleContact(db: Db, ownerId: number, ticked: unknown) {
  const first = (Array.isArray(ticked) ? ticked : [ticked]).find((v): v is string => typeof v === 'string' && /^\d{1,15}$/.test(v));
  const found = first ? await findContact(db, Number(first)) : undefined;
  if (found && found.row.user_id === ownerId) return found.row;
  return (await searchContacts(db, ownerId, { per_page: 1 })).rows[0];
}

/**
 * `POST /emails/preview`: the email of the compose form as a recipient will see it, without saving
 * anything. The form's Preview button posts here into the page's sandboxed frame (`formtarget`),
 * so the page and what was typed stay as they are, script or none. The body is cleaned as saving
 * cleans it, and rendered by `previewEmail` (email/render.ts), what sending writes, for a sample
 * contact's first name; the frame's document is sandboxed (`sendSandboxed`).
 */
export async function composePreviewPage(web: App, ctx: AppContext): Promise<void> {
  const { db } = ctx.database;
  web.post('/emails/preview', { schema: PAGE_SCHEMA }, async (request, reply) => {
    const viewer = request.viewer;
    if (!viewer) return toSignIn(request, reply);
    const form = (request.body ?? {}) as Record<string, unknown>;
    const text = (name: string) => (typeof form[name] === 'string' ? (form[name] as string) : '');
    const message = {
      ...(Object.fromEntries(TEXT.map((name) => [name, text(name).trim()])) as Record<(typeof TEXT)[number], string>),
      body: sanitizeEmailHtml(text('body')),
    };
    const signatureId = text('signature_id');
    const [signatureHtml, contact, sender] = await Promise.all([
      /^\d{1,15}$/.test(signatureId) ? findSignatureBody(db, viewer.owner.id, Number(signatureId)) : undefined,
      sampleContact(db, viewer.owner.id, form.recipients_contacts),
      findSenderFields(db, viewer.owner.id),
    ]);
    const person = { first_name: contact?.first_name ?? null, last_name: contact?.last_name ?? null };
    const postal = sender ? senderIdentity(sender, ctx.config).postalAddress : null;
    const email = previewEmail({ message, signatureHtml: signatureHtml ?? null }, person, postal);
    const who = contact
      ? [contact.first_name, contact.last_name].filter(Boolean).join(' ') || contact.email || `contact ${contact.id}`
      : null;
    const heading = [
      `<p style="font:14px sans-serif;color:#555;border-bottom:1px solid #ddd;padding-bottom:8px">`,
      `Subject: <strong>${escapeHtml(email.subject || '(no subject)')}</strong><br>`,
      who ? `As ${escapeHtml(who)} (a sample contact) will see it.` : 'As a contact without a first name will see it.',
      ' Not saved.</p>',
    ].join('');
    return sendSandboxed(
      reply,
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Preview: ${escapeHtml(email.subject)}</title></head><body>${heading}\n${email.html}</body></html>`,
    );
  });
}
