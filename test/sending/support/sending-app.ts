import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { DeliveryRow } from '../../../src/db/schema.ts';
import { createContact } from '../../contacts/fixtures.ts';
import { asKey } from '../../support/client.ts';
import { startTestApp, type TestApp, type TestAppOptions } from '../../support/test-app.ts';
import { type SmtpSink, startSmtpSink } from './smtp-sink.ts';
import { waitFor } from './wait.ts';

/**
 * The sending engine in-process (`startTestApp({ workers: true })`) with its SMTP pointed at a
 * real SMTP server on loopback, and the steps the engine tests repeat: contacts under a fresh
 * tag, a templated email to them, its status awaited by polling, its deliveries read from the
 * ledger.
 */
export interface SendingApp {
  t: TestApp;
  sink: SmtpSink;
  api: ReturnType<typeof asKey>;
  owner: number;
  close(): Promise<void>;
}

/** Real mail carries a postal address (CAN-SPAM): scheduling with SMTP_URL set needs one. */
export const TEST_POSTAL_ADDRESS = '100 Main Street, Springfield, IL 62701';

export async function startSendingApp(
  env: Record<string, string> = {},
  options: Pick<TestAppOptions, 'dnsResolver' | 'clock' | 'https'> = {},
): Promise<SendingApp> {
  const sink = await startSmtpSink();
  const t = await startTestApp({
    ...options,
    workers: true,
    env: { SMTP_URL: sink.url, MAIL_POSTAL_ADDRESS: TEST_POSTAL_ADDRESS, SEND_RETRY_BASE: '200ms', SEND_LEASE: '2s', ...env },
  });
  return {
    t,
    sink,
    api: asKey(t.app, t.adminKey),
    owner: t.adminId,
    async close() {
      await t.close();
      await sink.close();
    },
  };
}

export interface Audience {
  tag: { id: number; name: string };
  contacts: { id: number; email: string; first_name: string | null; status: string }[];
}

/** `n` contacts under a new tag (fields may differ per contact). */
export async function audience(s: SendingApp, n: number, fields: (i: number) => Record<string, unknown> = () => ({})): Promise<Audience> {
  const name = `tag-${randomBytes(4).toString('hex')}`;
  const contacts = [];
  for (let i = 0; i < n; i++) contacts.push(await createContact(s.api, s.owner, { first_name: `Pat${i}`, tags: [name], ...fields(i) }));
  const tags = await s.api.get(`/v3/users/${s.owner}/tags?name=${name}`);
  assert.equal(tags.status, 200, tags.raw);
  return { tag: tags.body.data[0], contacts };
}

export const toTag = (a: Audience) => [{ group: 'Tags', value: a.tag.id }];

/** Creates a templated email for the owner; `fields` may schedule it. */
export async function createEmail(s: SendingApp, fields: Record<string, unknown>) {
  const reply = await s.api.post(`/v3/users/${s.owner}/templated_emails`, {
    subject: 'A question for you, {{first_name}}',
    body: '<p>Have you thought about the market this spring, {{first_name}}?</p>',
    ...fields,
  });
  assert.equal(reply.status, 201, reply.raw);
  return reply.body;
}

export async function readEmail(s: SendingApp, id: number) {
  const reply = await s.api.get(`/v3/templated_emails/${id}`);
  assert.equal(reply.status, 200, reply.raw);
  return reply.body;
}

/** Polls the message until its status is one of `statuses`. */
export async function waitForStatus(s: SendingApp, id: number, statuses: string[], timeoutMs = 20_000) {
  return waitFor(
    `templated email ${id} to be ${statuses.join(' or ')}`,
    async () => {
      const message = await readEmail(s, id);
      return statuses.includes(message.status) && message;
    },
    { timeoutMs },
  );
}

export async function deliveriesOf(s: SendingApp, id: number): Promise<DeliveryRow[]> {
  return s.t.database.db
    .selectFrom('deliveries')
    .selectAll()
    .where('message_kind', '=', 'templated_email')
    .where('message_id', '=', id)
    .orderBy('id')
    .execute();
}

/**
 * Waits until every `message-due` job made for the message has run (pg-boss marks it
 * completed): after that, whatever the engine was going to do about the message's schedule, it
 * has done.
 */
export async function waitForDueJobs(s: SendingApp, id: number): Promise<void> {
  const schema = s.t.config.databaseSchema === 'public' ? 'pgboss' : `${s.t.config.databaseSchema}_pgboss`;
  await waitFor(`the due jobs of templated email ${id} to run`, async () => {
    const { rows } = await sql<{ state: string }>`
      SELECT state FROM ${sql.table(`${schema}.job`)} WHERE name = 'message-due' AND (data->>'id')::bigint = ${id}`.execute(
      s.t.database.db,
    );
    return rows.length > 0 && rows.every((r) => r.state === 'completed');
  });
}

/** The stored reason of a Failed message (templated emails do not show it in the API). */
export async function reasonOf(s: SendingApp, id: number): Promise<string | null> {
  const row = await s.t.database.db.selectFrom('templated_emails').select('reason').where('id', '=', id).executeTakeFirstOrThrow();
  return row.reason;
}

/** Sum of sent and failed: what docs/sending.md says the deliveries add up to when a message is Sent. */
export function handedOver(reporting: { sent: number; failed: number }): number {
  return reporting.sent + reporting.failed;
}
