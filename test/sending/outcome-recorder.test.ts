import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { usingPostgres } from '../support/test-app.ts';
import { audience, createEmail, deliveriesOf, type SendingApp, startSendingApp, toTag, waitForStatus } from './support/sending-app.ts';

/**
 * One outcome, one transaction (issue 39): the relay refuses an address for good (550 5.1.1), and
 * the database connection dies while the engine records it — after the delivery has moved, at the
 * moment the contact is retired. The engine waits the outage out and records the outcome again;
 * the delivery, its counters and its contact must all say "hard bounce", exactly once.
 *
 * On PostgreSQL the connection is really dropped: a trigger on the contact's change terminates its
 * own backend (pg_terminate_backend), the first time only. PGlite has one in-process connection to
 * give, so there the trigger fails the statement with the error a terminated backend reports
 * (SQLSTATE 57P01, admin_shutdown), which the engine also takes for the database going away.
 * Recorded in separate statements, as before, the delivery's move survived the drop, the retry found
 * it already bounced, and the contact stayed Subscribed.
 */
describe('an outcome recorded across a dropped database connection', () => {
  let s: SendingApp;
  before(async () => {
    s = await startSendingApp({ SMTP_MAX_CONNECTIONS: '1' });
  });
  after(() => s.close());

  test('the connection dies as the contact is retired: after the retry the delivery, the counters and the contact agree', async () => {
    const db = s.t.database.db;
    const drop = usingPostgres
      ? sql`PERFORM pg_terminate_backend(pg_backend_pid())`
      : sql`RAISE EXCEPTION 'terminating connection due to administrator command' USING ERRCODE = '57P01'`;
    await sql`CREATE SEQUENCE outcome_fault`.execute(db);
    await sql`
      CREATE FUNCTION outcome_fault() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('outcome_fault') = 1 THEN
          ${drop};
        END IF;
        RETURN NEW;
      END $$`.execute(db);
    await sql`
      CREATE TRIGGER outcome_fault BEFORE UPDATE OF status ON contacts FOR EACH ROW
      WHEN (OLD.status = 'Subscribed' AND NEW.status = 'Inactive - Hard Bounce')
      EXECUTE FUNCTION outcome_fault()`.execute(db);

    const people = await audience(s, 2);
    const rejected = people.contacts[0]!;
    s.sink.behave({ recipient: (address) => (address === rejected.email ? { code: 550, message: '5.1.1 No such user' } : undefined) });
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    const done = await waitForStatus(s, email.id, ['Sent', 'Failed'], 60_000);

    const bounced = (await deliveriesOf(s, email.id)).find((d) => Number(d.contact_id) === rejected.id);
    assert.equal(bounced?.state, 'bounced');
    assert.equal(bounced?.outcome?.permanent, true);
    const contact = (await s.api.get(`/v3/contacts/${rejected.id}`)).body;
    assert.equal(contact.status, 'Inactive - Hard Bounce', 'the contact is retired after the retry');
    const r = done.reporting;
    assert.deepEqual([r.sent, r.failed, r.bounce, r.hard_bounce, r.soft_bounce], [1, 1, 1, 1, 0], 'counted once');
    assert.equal(contact.email_suppression?.reason, 'hard_bounce');
    assert.equal(Number(contact.email_suppression?.delivery_id), Number(bounced?.id));
    assert.equal((await s.api.get(`/v3/contacts/${people.contacts[1]!.id}`)).body.status, 'Subscribed');
    const { rows } = await sql<{ last_value: string }>`SELECT last_value FROM outcome_fault`.execute(db);
    assert.ok(Number(rows[0]?.last_value) >= 2, 'the fault struck once, and the contact was changed after it');
  });
});
