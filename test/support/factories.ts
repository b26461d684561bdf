import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { RoleName } from '../../src/identity/roles.ts';
import { asKey } from './client.ts';
import type { TestApp } from './test-app.ts';

export interface Actor {
  id: number;
  teamId: number | null;
  key: string;
  email: string;
}

/** Creates a team through the API as the Administrator. */
export async function createTeam(t: TestApp, name = `Team ${randomBytes(3).toString('hex')}`): Promise<number> {
  const reply = await asKey(t.app, t.adminKey).post('/v3/teams', { name });
  assert.equal(reply.status, 201, reply.raw);
  return reply.body.id;
}

/** Creates a user with one role (and a key for them) through the API as the Administrator. */
export async function createUser(
  t: TestApp,
  role: RoleName,
  teamId: number | null = null,
  extra: Record<string, unknown> = {},
): Promise<Actor> {
  const admin = asKey(t.app, t.adminKey);
  const email = `u-${randomBytes(5).toString('hex')}@example.com`;
  const created = await admin.post('/v3/users', { first_name: 'Test', last_name: role, email, roles: [role], team_id: teamId, ...extra });
  assert.equal(created.status, 201, created.raw);
  const key = await admin.post(`/v3/users/${created.body.id}/api_keys`, { name: 'test' });
  assert.equal(key.status, 201, key.raw);
  return { id: created.body.id, teamId, key: key.body.key, email: created.body.email };
}

export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

/** The problem+json shape (README, "API conventions"), with the status it must carry. */
export function assertProblem(reply: { status: number; headers: Record<string, unknown>; body: any }, status: number, code?: string): void {
  assert.equal(reply.status, status, JSON.stringify(reply.body));
  assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
  assert.equal(reply.body.status, status);
  assert.equal(typeof reply.body.title, 'string');
  assert.equal(typeof reply.body.detail, 'string');
  assert.equal(reply.body.message, reply.body.detail);
  assert.match(reply.body.type, /\/problems\/\w+$/);
  if (code) assert.ok(reply.body.type.endsWith(`/problems/${code}`), `expected problem ${code}, got ${reply.body.type}`);
  if (status >= 500) assert.doesNotMatch(reply.body.detail, /at .*\.ts|SELECT|INSERT/);
}
