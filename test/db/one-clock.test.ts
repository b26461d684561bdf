import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { audioMedia, createMessage, DROPS, EMAILS } from '../messages/fixtures.ts';
import { asKey } from '../support/client.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * One clock: every time Hopper writes comes from the app's clock (`ctx.clock()`), never from the
 * database's `DEFAULT now()`. With the clock fixed at 2030-01-01, each resource a request creates
 * or changes says 2030, and so does every timestamp column of every row written.
 */
const CLOCK = new Date('2030-01-01T00:00:00Z');
const THEN = '2030-01-01T00:00:00Z';

describe('one clock', () => {
  let t: TestApp;
  let admin: ReturnType<typeof asKey>;
  let ownerId: number;

  before(async () => {
    t = await startTestApp({ clock: () => new Date(CLOCK) });
    admin = asKey(t.app, t.adminKey);
    ownerId = t.adminId;
  });
  after(() => t.close());

  /** POSTs `body` to `url`, then PUTs `change` to the resource: both answers carry the clock's time. */
  async function createAndUpdate(url: string, body: object, change: object, resourceUrl: (id: number) => string) {
    const created = await admin.post(url, body);
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.created_at, THEN, `${url}: created_at`);
    assert.equal(created.body.updated_at, THEN, `${url}: updated_at`);
    const updated = await admin.put(resourceUrl(created.body.id), change);
    assert.equal(updated.status, 200, updated.raw);
    assert.equal(updated.body.created_at, THEN);
    assert.equal(updated.body.updated_at, THEN);
    return created.body;
  }

  test('a contact POSTed and PUT says 2030 in created_at and updated_at (and the tags it made are of 2030)', async () => {
    await createAndUpdate(
      `/v3/users/${ownerId}/contacts`,
      { first_name: 'Pat', email: 'pat@example.com', tags: ['Sphere'] },
      { last_name: 'Lee', tags: ['Sphere', 'Buyers'] },
      (id) => `/v3/contacts/${id}`,
    );
  });

  test('teams, users, tags, signatures, templates, webhooks, media, drops and emails too', async () => {
    const team = await admin.post('/v3/teams', { name: 'Sunrise Realty' });
    assert.equal(team.body.created_at, THEN);
    await createAndUpdate(
      '/v3/users',
      { first_name: 'Jane', last_name: 'Agent', email: 'jane@example.com', team_id: team.body.id },
      { last_name: 'Agent-Smith' },
      (id) => `/v3/users/${id}`,
    );
    await createAndUpdate(`/v3/users/${ownerId}/tags`, { name: 'Sellers' }, { name: 'Past sellers' }, (id) => `/v3/tags/${id}`);
    await createAndUpdate(
      `/v3/users/${ownerId}/signatures`,
      { name: 'Work', body: '<p>Jane</p>' },
      { name: 'Office' },
      (id) => `/v3/signatures/${id}`,
    );
    await createAndUpdate(
      '/v3/templated_messages',
      { name: 'Check-in', subject: 'Hello', body: '<p>Hi</p>' },
      { name: 'Spring check-in' },
      (id) => `/v3/templated_messages/${id}`,
    );
    await createAndUpdate(
      `/v3/users/${ownerId}/webhooks`,
      { url: 'https://crm.example.com/hopper', events: ['contact.created'] },
      { description: 'CRM' },
      (id) => `/v3/webhooks/${id}`,
    );
    const media = await audioMedia(t, { id: ownerId });
    assert.equal(media.created_at, THEN);
    for (const kind of [DROPS, EMAILS]) {
      const message = await createMessage(t, kind, { id: ownerId });
      assert.equal(message.created_at, THEN, kind.label);
      assert.equal(message.updated_at, THEN, kind.label);
      const change = kind === DROPS ? { name: 'Renamed' } : { subject: 'Renamed' };
      const updated = await admin.put(`/v3/${kind.collection}/${message.id}`, change);
      assert.equal(updated.status, 200, updated.raw);
      assert.equal(updated.body.updated_at, THEN, kind.label);
    }
  });

  test("every timestamp Hopper wrote is the clock's: no row took the database's now()", async () => {
    const { rows: columns } = await sql<{ table: string; column: string }>`
      SELECT table_name AS table, column_name AS column FROM information_schema.columns
      WHERE table_schema = current_schema() AND data_type = 'timestamp with time zone' AND table_name <> 'kysely_migration'
      ORDER BY 1, 2`.execute(t.database.db);
    assert.ok(columns.length > 30, 'the schema has its timestamp columns');
    const early: string[] = [];
    for (const { table, column } of columns) {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM ${sql.table(table)} WHERE ${sql.ref(column)} < ${CLOCK}`.execute(t.database.db);
      if ((rows[0]?.n ?? 0) > 0) early.push(`${table}.${column} (${rows[0]?.n} rows)`);
    }
    assert.deepEqual(early, []);
  });
});
