import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { whileDatabaseAway } from '../../src/db/errors.ts';
import { recordSent } from '../../src/sending/deliveries.ts';
import { createMessage, createOwnContact, DROPS } from '../messages/fixtures.ts';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { assertPaging, idsOf } from '../support/paging.ts';
import { assertShape, pageShape } from '../support/shapes.ts';
import { startTestApp, type TestApp, usingPostgres } from '../support/test-app.ts';
import { DELIVERY, type SentDelivery, sendEmail } from './fixtures.ts';

/** `GET /{templated_emails|voicemail_drops}/{id}/deliveries`: the delivery ledger of a message. */
describe('deliveries of a message', () => {
  let t: TestApp;
  let owner: Actor;
  let teamAdmin: Actor;
  let outsider: Actor;
  let email: { id: number; deliveries: SentDelivery[] };
  const url = (id = email.id) => `/v3/templated_emails/${id}/deliveries`;

  before(async () => {
    t = await startTestApp({ workers: true });
    const team = await createTeam(t);
    owner = await createUser(t, 'User', team);
    teamAdmin = await createUser(t, 'Team Administrator', team);
    outsider = await createUser(t, 'User', await createTeam(t));
    email = await sendEmail(t, owner, 7);
  });
  after(() => t.close());

  const setState = (d: SentDelivery, state: string) =>
    sql`UPDATE deliveries SET state = ${state} WHERE id = ${d.id}`.execute(t.database.db);

  test('one item per recipient, in id order, with the address used and the API timestamps', async () => {
    const reply = await asKey(t.app, owner.key).get(url());
    assert.equal(reply.status, 200, reply.raw);
    assertShape(reply.body, pageShape(DELIVERY));
    const items = reply.body.data;
    assert.equal(items.length, 7);
    assert.deepEqual(
      items.map((d: SentDelivery) => d.id),
      [...items.map((d: SentDelivery) => d.id)].sort((a, b) => a - b),
    );
    const contacts = await asKey(t.app, owner.key).get(`/v3/users/${owner.id}/contacts?per_page=100`);
    const emailOf = new Map(contacts.body.data.map((c: { id: number; email: string }) => [c.id, c.email]));
    for (const item of items) {
      assert.equal(item.address, emailOf.get(item.contact_id));
      assert.equal(item.state, 'sent');
      assert.equal(item.attempts, 1);
      assert.equal(item.last_error, null);
      assert.match(item.provider_message_id, new RegExp(`^<templated_email-${email.id}\\.${item.id}@hopper\\.test>$`));
      assert.ok(item.sent_at !== null);
      assert.equal(item.delivered_at, null);
      // A sent email waits for nothing Hopper plans; no provider proof.
      assert.deepEqual([item.waiting_reason, item.next_attempt_at, item.proof_of_delivery_url], [null, null, null]);
    }
  });

  test('pages with the envelope of every search, keeping filters in the links', async () => {
    const client = asKey(t.app, owner.key);
    const ids = email.deliveries.map((d) => d.id);
    await assertPaging(client, url(), ids, 3, DELIVERY);
    await assertPaging(client, `${url()}?state=sent`, ids, 2, DELIVERY);
  });

  test('filters: state (repeatable, OR-ed) and contact_id', async () => {
    const [a, b, c] = email.deliveries as [SentDelivery, SentDelivery, SentDelivery];
    await setState(a, 'delivered');
    await setState(b, 'bounced');
    await setState(c, 'bounced');
    const client = asKey(t.app, owner.key);
    assert.deepEqual(idsOf(await client.get(`${url()}?state=bounced`)), [b.id, c.id]);
    assert.deepEqual(idsOf(await client.get(`${url()}?state=bounced&state=delivered`)), [a.id, b.id, c.id]);
    assert.deepEqual(idsOf(await client.get(`${url()}?state=failed`)), []);
    assert.deepEqual(idsOf(await client.get(`${url()}?contact_id=${c.contact_id}`)), [c.id]);
    assert.deepEqual(idsOf(await client.get(`${url()}?contact_id=${c.contact_id}&state=delivered`)), [a.id, c.id]);
    // Deliveries in different states still page in id order: the listing merges them state by state.
    const ids = email.deliveries.map((d) => d.id).sort((x, y) => x - y);
    await assertPaging(client, url(), ids, 1, DELIVERY);
    await assertPaging(client, `${url()}?state=bounced&state=delivered`, [a.id, b.id, c.id], 2, DELIVERY);
    await assertPaging(client, `${url()}?contact_id=${c.contact_id}&state=delivered`, [a.id, c.id], 1, DELIVERY);
    const pending = await client.get(`${url()}?state=delivered`);
    assert.equal(pending.body.meta.total, 1);

    for (const bad of ['state=Delivered', 'state=', 'contact_id=abc', 'contact_id=0', 'colour=red', 'per_page=101', 'page=0']) {
      assertProblem(await client.get(`${url()}?${bad}`), 400, 'validation');
    }
  });

  test('readable by whoever may read the message: owner, their Team Administrator, Administrators', async () => {
    for (const key of [owner.key, teamAdmin.key, t.adminKey]) {
      assert.equal((await asKey(t.app, key).get(url())).status, 200);
    }
    assertProblem(await asKey(t.app, outsider.key).get(url()), 403, 'forbidden');
    assertProblem(await asKey(t.app, undefined).get(url()), 401, 'unauthorized');
    assertProblem(await asKey(t.app, owner.key).get(url(999_999)), 404, 'not_found');
    assertProblem(await asKey(t.app, outsider.key).get(url(999_999)), 404, 'not_found');
  });

  test('a deleted message has no deliveries to list: 404', async () => {
    const other = await sendEmail(t, owner, 1);
    const client = asKey(t.app, owner.key);
    assert.equal((await client.get(url(other.id))).status, 200);
    assert.equal((await client.delete(`/v3/templated_emails/${other.id}`)).status, 200);
    assertProblem(await client.get(url(other.id)), 404, 'not_found');
    assertProblem(await asKey(t.app, outsider.key).get(url(other.id)), 404, 'not_found');
  });

  test('voicemail drops list theirs the same way, with the phone number as the address', async () => {
    const drop = await createMessage(t, DROPS, owner);
    const dropUrl = `/v3/voicemail_drops/${drop.id}/deliveries`;
    const client = asKey(t.app, owner.key);
    assert.deepEqual(idsOf(await client.get(dropUrl)), [], 'a draft has no deliveries yet');

    const contact = await createOwnContact(t, owner, { phone: '(727) 232-9117' });
    await sql`
      INSERT INTO deliveries (user_id, message_kind, message_id, contact_id, address, state)
      VALUES (${owner.id}, 'voicemail_drop', ${drop.id}, ${contact.id}, '7272329117', 'held')`.execute(t.database.db);
    const reply = await client.get(dropUrl);
    assertShape(reply.body, pageShape(DELIVERY));
    assert.deepEqual(
      reply.body.data.map((d: SentDelivery & { state: string }) => [d.contact_id, d.address, d.state]),
      [[contact.id, '7272329117', 'held']],
    );
    // Message ids of the two kinds overlap: each list holds its own kind's deliveries only.
    assert.ok(!idsOf(await client.get(url())).includes(reply.body.data[0].id));
    assertProblem(await asKey(t.app, outsider.key).get(dropUrl), 403, 'forbidden');
  });
});

/** recordSent, the engine's hot path: a VALUES list up to 20 outcomes, arrays past it; fenced by the claim. */
describe('recording sent outcomes', () => {
  let t: TestApp;
  let email: { id: number; deliveries: SentDelivery[] };

  before(async () => {
    t = await startTestApp({ workers: true });
    email = await sendEmail(t, await createUser(t, 'User', await createTeam(t)), 3);
  });
  after(() => t.close());

  const sentCount = async () => {
    const { rows } = await sql<{ sent: string }>`
      SELECT coalesce(sum(sent), 0) AS sent FROM message_counters WHERE message_kind = 'templated_email' AND message_id = ${email.id}`.execute(
      t.database.db,
    );
    return Number(rows[0]?.sent);
  };
  const reclaim = () =>
    sql`UPDATE deliveries SET state = 'sending', attempts = 2 WHERE message_kind = 'templated_email' AND message_id = ${email.id}`.execute(
      t.database.db,
    );

  for (const size of [3, 25]) {
    test(`${size} outcomes in one statement: only current claims move, each counted once`, async () => {
      await reclaim();
      const before = await sentCount();
      const [a, b, c] = email.deliveries.map((d) => d.id) as [number, number, number];
      const outcomes = [
        { id: a, attempts: 2, providerMessageId: '<a@x>' },
        { id: b, attempts: 2, providerMessageId: null },
        { id: c, attempts: 1, providerMessageId: '<stale@x>' }, // a claim that was taken over: not ours
      ];
      // Ids nobody has: nothing moves for them.
      for (let i = outcomes.length; i < size; i++) outcomes.push({ id: 1_000_000_000 + i, attempts: 1, providerMessageId: null });
      assert.equal(await recordSent(t.database.db, outcomes, new Date(), 3), 2);
      assert.equal(await sentCount(), before + 2);
      const { rows } = await sql<{ id: string; state: string; provider_message_id: string | null }>`
        SELECT id, state, provider_message_id FROM deliveries WHERE id = ANY (${[a, b, c]}::bigint[]) ORDER BY id`.execute(t.database.db);
      assert.deepEqual(
        rows.map((r) => [Number(r.id), r.state, r.provider_message_id]),
        [
          [a, 'sent', '<a@x>'],
          [b, 'sent', null],
          [c, 'sending', `<templated_email-${email.id}.${c}@hopper.test>`],
        ],
      );
    });
  }

  test('a record that PostgreSQL ends to break a deadlock is tried again, not lost', {
    skip: !usingPostgres && 'two connections at once need PostgreSQL',
  }, async () => {
    await reclaim();
    const before = await sentCount();
    const [low, high] = email.deliveries.map((d) => d.id).toSorted((x, y) => x - y) as [number, number];
    const { db } = t.database;
    const deadlocks = async () =>
      Number(
        (await sql<{ n: string }>`SELECT deadlocks AS n FROM pg_stat_database WHERE datname = current_database()`.execute(db)).rows[0]?.n,
      );
    const deadlocksBefore = await deadlocks();
    // Another writer holds the higher row; the record takes the lower one and waits for it.
    const { recording } = await db.transaction().execute(async (trx) => {
      await sql`SELECT id FROM deliveries WHERE id = ${high} FOR UPDATE`.execute(trx);
      const xid = (await sql<{ xid: string }>`SELECT pg_current_xact_id()::text AS xid`.execute(trx)).rows[0]?.xid;
      const recording = whileDatabaseAway(() =>
        recordSent(
          db,
          [
            { id: low, attempts: 2, providerMessageId: null },
            { id: high, attempts: 2, providerMessageId: null },
          ],
          new Date(),
          3,
        ),
      );
      recording.catch(() => {});
      for (let waited = 0; ; waited += 10) {
        const { rows } = await sql<{ n: string }>`
            SELECT count(*) AS n FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted AND transactionid::text = ${xid}`.execute(
          db,
        );
        if (Number(rows[0]?.n) > 0) break;
        assert.ok(waited < 5_000, 'the record never waited for the higher row');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // The writer now wants the lower row, which the record holds: a deadlock. The record, waiting
      // longer, is the one PostgreSQL ends; the writer goes on and commits.
      await sql`UPDATE deliveries SET lease_until = now() + interval '10 seconds' WHERE id = ${low}`.execute(trx);
      return { recording };
    });
    assert.equal(await recording, 2, 'tried again once the writer committed');
    assert.equal(await sentCount(), before + 2);
    assert.ok((await deadlocks()) > deadlocksBefore, 'PostgreSQL saw the deadlock');
  });
});
