import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { createContact } from '../contacts/fixtures.ts';
import { mp3File, PNG, upload, wavFile } from '../media/fixtures.ts';
import { asKey } from '../support/client.ts';
import type { Actor } from '../support/factories.ts';
import { arrayOf, type Shape } from '../support/shapes.ts';
import type { TestApp } from '../support/test-app.ts';

/**
 * The two message resources of the specification, their shapes declared once from its tables
 * (docs/decisions.md decides the nullables it leaves open), and helpers that make what a valid body
 * needs: audio media, tags, contacts, signatures, library templates.
 */

/** The specification's "Reporting object": fourteen integer counters and `date`, always null. */
export const REPORTING: Shape = {
  date: 'null',
  sent: 'integer',
  processed: 'integer',
  delivered: 'integer',
  open: 'integer',
  click: 'integer',
  reply: 'integer',
  spamreport: 'integer',
  unsubscribe: 'integer',
  deferred: 'integer',
  dropped: 'integer',
  bounce: 'integer',
  hard_bounce: 'integer',
  soft_bounce: 'integer',
  failed: 'integer',
};
export const ZERO_REPORTING = Object.fromEntries(Object.keys(REPORTING).map((k) => [k, k === 'date' ? null : 0]));

/** The specification's "Media (embedded in a voicemail drop)". */
export const MEDIA: Shape = {
  id: 'integer',
  name: 'string',
  file_name: 'string',
  collection_name: 'string',
  mime_type: 'string',
  size: 'integer',
  readable_size: 'string',
  full_url: 'url',
  download_url: 'url',
  created_at: 'timestamp',
  updated_at: 'timestamp',
  deleted_at: 'timestamp|null',
};

export const RECIPIENT: Shape = { group: 'string', label: 'string', value: 'integer' };

/** The specification's "Voicemail drop"; send_at, sending_at and sent_at are null until known. */
export const VOICEMAIL_DROP: Shape = {
  id: 'integer',
  provider: 'string',
  media_id: 'integer',
  callback_number: 'string',
  name: 'string',
  description: 'string|null',
  status: 'string',
  reason: 'string|null',
  send_type: 'string',
  send_at: 'timestamp|null',
  sending_at: 'timestamp|null',
  sent_at: 'timestamp|null',
  recipients: arrayOf(RECIPIENT),
  reporting: REPORTING,
  // Correlation (docs/webhooks.md): the tests using these shapes set no metadata.
  external_id: 'string|null',
  metadata: {},
  created_at: 'timestamp',
  updated_at: 'timestamp',
  deleted_at: 'timestamp|null',
  media: MEDIA,
};

/** The specification's "Templated email"; the two references are null when not given; exclusions always null. */
export const TEMPLATED_EMAIL: Shape = {
  id: 'integer',
  templated_message_id: 'integer|null',
  subject: 'string',
  description: 'string',
  greeting_with_first_name: 'string',
  greeting_without_first_name: 'string',
  body: 'string',
  closing: 'string',
  ps_line: 'string',
  text: 'string',
  signature_id: 'integer|null',
  status: 'string',
  send_type: 'string',
  send_at: 'timestamp|null',
  sending_at: 'timestamp|null',
  sent_at: 'timestamp|null',
  recipients: arrayOf(RECIPIENT),
  exclusions: 'null',
  source: 'string',
  reporting: REPORTING,
  // Correlation (docs/webhooks.md): the tests using these shapes set no metadata.
  external_id: 'string|null',
  metadata: {},
  created_at: 'timestamp',
  updated_at: 'timestamp',
  deleted_at: 'timestamp|null',
};

export type Client = ReturnType<typeof asKey>;

/** An audio media item of `owner`, uploaded by the Administrator on their behalf. */
export async function audioMedia(t: TestApp, owner: { id: number }, kind: 'wav' | 'mp3' = 'wav') {
  // Longer than the 5 s providers require of a voicemail drop's audio.
  return kind === 'wav'
    ? upload(t.app, t.adminKey, owner.id, 'open-house.wav', wavFile(6))
    : upload(t.app, t.adminKey, owner.id, 'open-house.mp3', mp3File(6));
}

export async function imageMedia(t: TestApp, owner: { id: number }) {
  return upload(t.app, t.adminKey, owner.id, 'logo.png', PNG, [{ name: 'collection_name', value: 'images' }]);
}

export async function createTag(t: TestApp, owner: { id: number }, name: string): Promise<{ id: number; name: string }> {
  const reply = await asKey(t.app, t.adminKey).post(`/v3/users/${owner.id}/tags`, { name });
  assert.equal(reply.status, 201, reply.raw);
  return reply.body;
}

export async function createSignature(t: TestApp, owner: { id: number }, body = '<p>Jane Agent</p>'): Promise<{ id: number }> {
  const reply = await asKey(t.app, t.adminKey).post(`/v3/users/${owner.id}/signatures`, { name: 'Work', body });
  assert.equal(reply.status, 201, reply.raw);
  return reply.body;
}

export async function createOwnContact(t: TestApp, owner: { id: number }, fields: Record<string, unknown> = {}) {
  return createContact(asKey(t.app, t.adminKey), owner.id, fields);
}

export async function createTemplate(t: TestApp, fields: Record<string, unknown> = {}) {
  const reply = await asKey(t.app, t.adminKey).post('/v3/templated_messages', {
    name: 'Spring check-in',
    subject: 'Quick question, {{first_name}}',
    description: 'Spring check-in',
    body: '<p>Have you thought about the market this spring?</p>',
    closing: 'Talk soon,',
    ps_line: 'Reply to this email with any question.',
    ...fields,
  });
  assert.equal(reply.status, 201, reply.raw);
  return reply.body;
}

/** What tells the two resources apart in the tests that cover both the same way. */
export interface MessageKind {
  collection: 'voicemail_drops' | 'templated_emails';
  label: string;
  shape: Shape;
  /** A text field that takes any string (for round trips, SQL and HTML). */
  textField: 'name' | 'subject';
  /** A minimal valid create body for `owner` (it prepares what the body names). */
  validBody(t: TestApp, owner: { id: number }): Promise<Record<string, unknown>>;
}

const mediaOf = new Map<string, number>();

export const DROPS: MessageKind = {
  collection: 'voicemail_drops',
  label: 'voicemail drop',
  shape: VOICEMAIL_DROP,
  textField: 'name',
  async validBody(t, owner) {
    const cacheKey = `${t.dataDir}:${owner.id}`;
    let mediaId = mediaOf.get(cacheKey);
    if (mediaId === undefined) {
      mediaId = (await audioMedia(t, owner)).id as number;
      mediaOf.set(cacheKey, mediaId);
    }
    return { provider: 'Sandbox', media_id: mediaId, callback_number: '(727) 232-9117', name: 'Open house follow-up' };
  },
};

export const EMAILS: MessageKind = {
  collection: 'templated_emails',
  label: 'templated email',
  shape: TEMPLATED_EMAIL,
  textField: 'subject',
  async validBody() {
    return { subject: 'Quick question, {{first_name}}', body: '<p>Have you thought about the market this spring?</p>' };
  },
};

export const KINDS = [DROPS, EMAILS] as const;

/** Creates a message of `kind` for `owner` through the API (as the Administrator) and returns it. */
export async function createMessage(t: TestApp, kind: MessageKind, owner: { id: number }, fields: Record<string, unknown> = {}) {
  const reply = await asKey(t.app, t.adminKey).post(`/v3/users/${owner.id}/${kind.collection}`, {
    ...(await kind.validBody(t, owner)),
    ...fields,
  });
  assert.equal(reply.status, 201, reply.raw);
  return reply.body;
}

/** Puts a message into a state only the sending engine reaches (Sending, Sent, Failed, Cancelled). */
export async function forceStatus(t: TestApp, kind: MessageKind, id: number, status: string): Promise<void> {
  await sql`UPDATE ${sql.table(kind.collection)} SET status = ${status} WHERE id = ${id}`.execute(t.database.db);
}

/** A time `ms` from now as the API writes it (whole seconds, UTC). */
export function apiTime(ms: number): string {
  return `${new Date(Date.now() + ms).toISOString().slice(0, 19)}Z`;
}

export type { Actor };
