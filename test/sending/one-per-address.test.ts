import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { resolveDeliveries } from '../../src/sending/deliveries.ts';
import { createMessage, createOwnContact, DROPS } from '../messages/fixtures.ts';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { waitFor } from './fixtures.ts';

/**
 * One person, one email per message: contacts of one owner that share an email address (any
 * letter case) or, for a voicemail drop, a phone number get one delivery between them; the
 * deliveries listing shows the other contacts `skipped`, naming the contact who got it.
 */
describe('one delivery per address', () => {
  let t: TestApp;
  let owner: Actor;
  before(async () => {
    t = await startTestApp({ workers: true });
    owner = await createUser(t, 'User');
  });
  after(() => t.close());

  /**
   * A second contact with an address the owner already has, as older data may hold (the API refuses
   * it now): marked `duplicate_email`, as migration 0021 marks such contacts, when another live
   * contact has its email.
   */
  async function twin(of: { id: number }, fields: { email?: string; phone?: string }): Promise<number> {
    const email = fields.email ?? null;
    const row = await sql<{ id: number }>`
      INSERT INTO contacts (user_id, first_name, email, phone, duplicate_email)
      SELECT ${owner.id}, 'Twin', ${email}::text, ${fields.phone ?? null}::text,
             EXISTS (SELECT 1 FROM contacts WHERE user_id = ${owner.id} AND deleted_at IS NULL AND lower(email) = lower(${email}::text))
      RETURNING id`.execute(t.database.db);
    assert.ok(of.id);
    return Number(row.rows[0]!.id);
  }

  const deliveries = async (collection: string, id: number, n: number) =>
    waitFor(`${n} deliveries of ${collection} ${id}`, async () => {
      const listed = await asKey(t.app, owner.key).get(`/v3/${collection}/${id}/deliveries?per_page=100`);
      return listed.body.data?.length === n
        ? (listed.body.data as { contact_id: number; state: string; last_error: string | null }[])
        : undefined;
    });

  test('creating a contact with an email another contact of the owner has (any case) is 409 naming it', async () => {
    const client = asKey(t.app, owner.key);
    const first = await client.post(`/v3/users/${owner.id}/contacts`, { first_name: 'Pat', email: 'Pat.Doe@Example.test' });
    assert.equal(first.status, 201, first.raw);
    const again = await client.post(`/v3/users/${owner.id}/contacts`, { first_name: 'Patricia', email: 'pat.doe@example.TEST' });
    assertProblem(again, 409, 'conflict');
    assert.match(again.body.detail, new RegExp(`Contact ${first.body.id}\\b`));
    // Changing another contact's email to it is refused the same way; the contact itself may keep or re-case it.
    const other = await client.post(`/v3/users/${owner.id}/contacts`, { first_name: 'Sam', email: 'sam@example.test' });
    assertProblem(await client.put(`/v3/contacts/${other.body.id}`, { email: 'PAT.DOE@example.test' }), 409, 'conflict');
    assert.equal((await client.put(`/v3/contacts/${first.body.id}`, { email: 'pat.doe@example.test' })).status, 200);
    // Another owner's contacts are theirs: the same address is fine there.
    const stranger = await createUser(t, 'User');
    const theirs = await asKey(t.app, stranger.key).post(`/v3/users/${stranger.id}/contacts`, { email: 'pat.doe@example.test' });
    assert.equal(theirs.status, 201, theirs.raw);
  });

  test('a templated email to two contacts with one address (any case) sends one email; the listing says who was skipped', async () => {
    const a = await createOwnContact(t, owner, { first_name: 'Alex', email: 'alex.twin@example.test' });
    const b = await twin(a, { email: 'ALEX.TWIN@example.test' });
    const c = await createOwnContact(t, owner, { first_name: 'Chris' });
    const created = await asKey(t.app, owner.key).post(`/v3/users/${owner.id}/templated_emails`, {
      subject: 'Hello {{first_name}}',
      body: '<p>Hi</p>',
      recipients: [a, { id: b }, c].map((x) => ({ group: 'Contacts', value: x.id })),
      status: 'Scheduled',
    });
    assert.equal(created.status, 201, created.raw);
    await waitFor('the email to be Sent', async () => {
      const read = await asKey(t.app, owner.key).get(`/v3/templated_emails/${created.body.id}`);
      return read.body.status === 'Sent' ? true : undefined;
    });
    const listed = await deliveries('templated_emails', created.body.id, 3);
    const byContact = new Map(listed.map((d) => [d.contact_id, d]));
    assert.equal(byContact.get(a.id)?.state, 'sent');
    assert.equal(byContact.get(c.id)?.state, 'sent');
    assert.equal(byContact.get(b)?.state, 'skipped');
    assert.match(byContact.get(b)?.last_error ?? '', new RegExp(`same email address as contact ${a.id}\\b`));
    const skipped = await asKey(t.app, owner.key).get(`/v3/templated_emails/${created.body.id}/deliveries?state=skipped`);
    assert.deepEqual(
      skipped.body.data.map((d: { contact_id: number }) => d.contact_id),
      [b],
    );
    const outbox = await sql<{
      n: string;
    }>`SELECT count(*) AS n FROM deliveries WHERE message_id = ${created.body.id} AND state = 'sent'`.execute(t.database.db);
    assert.equal(Number(outbox.rows[0]!.n), 2, 'two emails for three contacts');
  });

  test('resolving in small batches: an address reached in an earlier batch is skipped later; a re-run changes nothing', async () => {
    const first = await createOwnContact(t, owner, { first_name: 'Batch', email: 'batch.one@example.test' });
    const others = [
      await twin(first, { email: 'Batch.One@example.test' }),
      await twin(first, { email: 'batch.two@example.test' }),
      await twin(first, { email: 'BATCH.TWO@example.test' }),
      await twin(first, { email: 'batch.one@EXAMPLE.test' }),
    ];
    const ids = [first.id, ...others];
    const message = {
      id: 987_654,
      user_id: owner.id,
      recipients: ids.map((id) => ({ group: 'Contacts' as const, value: id, label: String(id) })),
    };
    const states = async () =>
      (
        await t.database.db
          .selectFrom('deliveries')
          .select(['contact_id', 'state', 'last_error'])
          .where('message_kind', '=', 'templated_email')
          .where('message_id', '=', message.id)
          .orderBy('contact_id')
          .execute()
      ).map((d) => [Number(d.contact_id), d.state, d.last_error]);
    // Two contacts a statement: each duplicate meets its first contact in another batch or in its own.
    assert.equal(await resolveDeliveries(t.database.db, 'templated_email', message, new Date(), 2), 2);
    const expected = [
      [ids[0], 'queued', null],
      [ids[1], 'skipped', `skipped: same email address as contact ${ids[0]}, who gets this message`],
      [ids[2], 'queued', null],
      [ids[3], 'skipped', `skipped: same email address as contact ${ids[2]}, who gets this message`],
      [ids[4], 'skipped', `skipped: same email address as contact ${ids[0]}, who gets this message`],
    ];
    assert.deepEqual(await states(), expected);
    assert.equal(await resolveDeliveries(t.database.db, 'templated_email', message, new Date(), 2), 2);
    assert.deepEqual(await states(), expected);
  });

  test('a voicemail drop to two contacts with one phone number drops once', async () => {
    const a = await createOwnContact(t, owner, { first_name: 'Dana', email: null, phone: '+12025550143' });
    const b = await twin(a, { phone: a.phone });
    const drop = await createMessage(t, DROPS, owner, {
      recipients: [a.id, b].map((id) => ({ group: 'Contacts', value: id })),
      status: 'Scheduled',
    });
    const listed = await deliveries('voicemail_drops', drop.id, 2);
    const skipped = listed.find((d) => d.contact_id === b);
    assert.equal(skipped?.state, 'skipped');
    assert.match(skipped?.last_error ?? '', new RegExp(`same phone number as contact ${a.id}\\b`));
    assert.notEqual(listed.find((d) => d.contact_id === a.id)?.state, 'skipped');
  });
});
