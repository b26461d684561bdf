import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject, randomUUID, sign } from 'node:crypto';
import { createOwnContact } from '../messages/fixtures.ts';
import { asKey, type Reply } from '../support/client.ts';
import { nullable, type Shape } from '../support/shapes.ts';
import type { TestApp } from '../support/test-app.ts';

/** The delivery item of `GET /{collection}/{id}/deliveries`. */
export const DELIVERY: Shape = {
  id: 'integer',
  contact_id: 'integer',
  address: 'string',
  state: 'string',
  attempts: 'integer',
  last_error: 'string|null',
  outcome: nullable({
    classification: 'string',
    permanent: 'boolean',
    code: 'string|null',
    description: 'string|null',
    source: 'string',
    at: 'timestamp',
  }),
  provider_message_id: 'string|null',
  sent_at: 'timestamp|null',
  delivered_at: 'timestamp|null',
  waiting_reason: 'string|null',
  next_attempt_at: 'timestamp|null',
  proof_of_delivery_url: 'string|null',
  message_external_id: 'string|null',
  message_metadata: {},
  created_at: 'timestamp',
  updated_at: 'timestamp',
};

/** Polls `probe` until it returns a value other than undefined, or fails at the deadline. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A SendGrid account's signing key pair: the public half as SendGrid shows it (base64 DER SPKI). */
export function sendgridKeyPair(): { privateKey: KeyObject; publicKeyBase64: string; publicKeyPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return {
    privateKey,
    publicKeyBase64: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
  };
}

/** The two headers SendGrid's signed Event Webhook sends with `body`. */
export function signedHeaders(privateKey: KeyObject, body: string | Buffer, timestamp = Math.floor(Date.now() / 1000)) {
  const signature = sign('sha256', Buffer.concat([Buffer.from(String(timestamp)), Buffer.from(body)]), {
    key: privateKey,
    dsaEncoding: 'der',
  });
  return {
    'x-twilio-email-event-webhook-timestamp': String(timestamp),
    'x-twilio-email-event-webhook-signature': signature.toString('base64'),
  };
}

export interface SentDelivery {
  id: number;
  contact_id: number;
  address: string;
  state?: string;
}

/** A SendGrid event about `delivery`, in the webhook's format (custom args as top-level keys). */
export function sendgridEvent(delivery: SentDelivery, event: string, extra: Record<string, unknown> = {}) {
  return {
    email: delivery.address,
    timestamp: Math.floor(Date.now() / 1000),
    event,
    sg_event_id: randomUUID(),
    sg_message_id: `sg-${delivery.id}.filter0001`,
    'smtp-id': `<templated_email-x.${delivery.id}@hopper.test>`,
    category: [],
    hopper_delivery_id: String(delivery.id),
    ...extra,
  };
}

/** Posts a batch as SendGrid would: signed with `privateKey` (unless headers say otherwise), no API key. */
export async function postWebhook(
  t: TestApp,
  privateKey: KeyObject | undefined,
  batch: unknown,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const body = typeof batch === 'string' ? batch : JSON.stringify(batch);
  return asKey(t.app, undefined).post('/v3/callbacks/sendgrid', body, {
    'content-type': 'application/json',
    ...(privateKey ? signedHeaders(privateKey, body) : {}),
    ...headers,
  });
}

/**
 * Makes `count` contacts for `owner`, sends them one templated email for real (the sending engine
 * writes it to the outbox) and waits until it is Sent. Returns the message id and its deliveries.
 */
export async function sendEmail(t: TestApp, owner: { id: number }, count: number): Promise<{ id: number; deliveries: SentDelivery[] }> {
  const contacts = [];
  for (let i = 0; i < count; i++) contacts.push(await createOwnContact(t, owner, { first_name: `Pat${i}` }));
  const admin = asKey(t.app, t.adminKey);
  const created = await admin.post(`/v3/users/${owner.id}/templated_emails`, {
    subject: 'Quick question, {{first_name}}',
    body: '<p>Have you thought about the market this spring?</p>',
    recipients: contacts.map((c) => ({ group: 'Contacts', value: c.id })),
    status: 'Scheduled',
  });
  assert.equal(created.status, 201, created.raw);
  const { id } = created.body;
  await waitFor(`templated email ${id} to be Sent`, async () => {
    const read = await admin.get(`/v3/templated_emails/${id}`);
    assert.ok(!['Failed', 'Cancelled'].includes(read.body.status), read.raw);
    return read.body.status === 'Sent' ? true : undefined;
  });
  const listed = await admin.get(`/v3/templated_emails/${id}/deliveries?per_page=100`);
  assert.equal(listed.status, 200, listed.raw);
  assert.equal(listed.body.data.length, count);
  return { id, deliveries: listed.body.data };
}
