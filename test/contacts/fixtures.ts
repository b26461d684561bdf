import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { asKey } from '../support/client.ts';
import { nullable, type Shape } from '../support/shapes.ts';

/** Why a channel no longer reaches a contact (docs/outcomes.md). */
const SUPPRESSION: Shape = { reason: 'string', at: 'timestamp|null', delivery_id: 'integer|null', description: 'string|null' };

/** The API shapes of the supporting resources (docs/contacts.md), checked exactly by assertShape. */
export const CONTACT: Shape = {
  id: 'integer',
  user_id: 'integer',
  first_name: 'string|null',
  last_name: 'string|null',
  full_name: 'string|null',
  email: 'string|null',
  phone: 'string|null',
  time_zone: 'string|null',
  status: 'string',
  email_suppression: nullable(SUPPRESSION),
  phone_suppression: nullable(SUPPRESSION),
  tags: 'string[]',
  external_id: 'string|null',
  created_at: 'timestamp',
  updated_at: 'timestamp',
  deleted_at: 'timestamp|null',
};

export const TAG: Shape = {
  id: 'integer',
  name: 'string',
  contacts_count: 'integer',
  created_at: 'timestamp',
  updated_at: 'timestamp',
};

export const SIGNATURE: Shape = {
  id: 'integer',
  name: 'string',
  body: 'string',
  created_at: 'timestamp',
  updated_at: 'timestamp',
  deleted_at: 'timestamp|null',
};

export const TEMPLATED_MESSAGE: Shape = {
  id: 'integer',
  name: 'string',
  subject: 'string',
  description: 'string|null',
  greeting_with_first_name: 'string',
  greeting_without_first_name: 'string',
  body: 'string',
  closing: 'string|null',
  ps_line: 'string|null',
  created_at: 'timestamp',
  updated_at: 'timestamp',
  deleted_at: 'timestamp|null',
};

/** Creates a contact for `userId` through the API; a unique email unless the fields give one. */
export async function createContact(client: ReturnType<typeof asKey>, userId: number, fields: Record<string, unknown> = {}) {
  const reply = await client.post(`/v3/users/${userId}/contacts`, {
    first_name: 'Pat',
    email: `c-${randomBytes(4).toString('hex')}@example.com`,
    ...fields,
  });
  assert.equal(reply.status, 201, reply.raw);
  return reply.body;
}
