import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { recordDeliveryEvents } from '../../src/sending/delivery-events.ts';
import { parseEmail } from '../sending/support/mime.ts';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import { assertProblem } from '../support/factories.ts';

/**
 * Finding 4 of issue 36: "only the person's own word" lifts an unsubscribe or a complaint
 * (docs/decisions.md), but the owner re-subscribed such a contact with a plain PUT, a CSV import,
 * or by deleting and re-creating it. Every path now refuses, saying why, and the address keeps its
 * suppression whichever contact holds it. What the owner set themselves they may undo.
 */
describe("the person's own word", () => {
  let s: SendingApp;
  /** Contacts who said no through an email: unsubscribed by its link, complained through a relay. */
  let gone: { id: number; email: string };
  let angry: { id: number; email: string };
  let fresh: { id: number; email: string };
  let deliveryOf: Map<number, number>;
  before(async () => {
    s = await startSendingApp();
    const people = await audience(s, 4);
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    await waitForStatus(s, email.id, ['Sent']);
    const deliveries = (await s.api.get(`/v3/templated_emails/${email.id}/deliveries?per_page=100`)).body.data as {
      id: number;
      contact_id: number;
    }[];
    deliveryOf = new Map(deliveries.map((d) => [d.contact_id, d.id]));
    [gone, angry, fresh] = people.contacts as [(typeof people.contacts)[0], (typeof people.contacts)[0], (typeof people.contacts)[0]];
    // The one-click unsubscribe of the email's own List-Unsubscribe link (RFC 8058), as a mail client posts it.
    const [message] = s.sink.to(gone.email);
    const link = /^<(https:[^>]+)>/.exec(parseEmail(message!.raw).headers.get('list-unsubscribe') ?? '')?.[1] ?? '';
    const unsubscribed = await s.t.app.inject({
      method: 'POST',
      url: new URL(link).pathname,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'List-Unsubscribe=One-Click',
    });
    assert.equal(unsubscribed.statusCode, 200, unsubscribed.body);
    // A complaint, as a relay's webhook records it.
    const now = new Date();
    await recordDeliveryEvents(
      s.t.database.db,
      [{ source: 'sendgrid', eventId: `spam-${angry.id}`, deliveryId: deliveryOf.get(angry.id)!, type: 'spamreport', occurredAt: now }],
      now,
    );
    assert.equal((await contact(gone.id)).status, 'Unsubscribed');
    assert.equal((await contact(angry.id)).status, 'Inactive - Spam Complaint');
  });
  after(() => s.close());

  const contact = async (id: number) => (await s.api.get(`/v3/contacts/${id}`)).body;
  const csv = (text: string) => s.api.post(`/v3/users/${s.owner}/contacts/import`, text, { 'content-type': 'text/csv' });

  test('PUT cannot re-subscribe them, nor move them to a status the owner could then lift: 409 saying why', async () => {
    for (const [who, status] of [
      [gone, 'Subscribed'],
      [gone, 'Inactive - Hard Bounce'],
      [angry, 'Subscribed'],
      [angry, 'Unsubscribed'],
    ] as const) {
      const before = await contact(who.id);
      const reply = await s.api.put(`/v3/contacts/${who.id}`, { status });
      assertProblem(reply, 409, 'conflict');
      assert.match(reply.body.errors.status[0], /own word/, `${who.email} → ${status}`);
      assert.deepEqual(await contact(who.id), before, 'nothing changed');
    }
    // The same status again, with other changes, is fine, and keeps the person's suppression as it was.
    const kept = await contact(gone.id);
    const renamed = await s.api.put(`/v3/contacts/${gone.id}`, { ...kept, first_name: 'Renamed' });
    assert.equal(renamed.status, 200, renamed.raw);
    assert.deepEqual(renamed.body.email_suppression, kept.email_suppression);
    assert.equal(renamed.body.email_suppression.delivery_id, deliveryOf.get(gone.id));
  });

  test('a CSV or JSON-lines import cannot either: the row is refused with why, the rest imported', async () => {
    const reply = await csv(
      `email,first_name,status\n${gone.email},Ann,Subscribed\n${angry.email},Bob,Unsubscribed\nnew-person@example.com,Cy,Subscribed\n`,
    );
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.body.created, 1);
    assert.deepEqual(
      reply.body.refused.map((r: { line: number }) => r.line),
      [2, 3],
    );
    for (const refused of reply.body.refused) assert.match(refused.errors.status[0], /own word/);
    const lines = await s.api.post(
      `/v3/users/${s.owner}/contacts/import`,
      `{"email":"${gone.email.toUpperCase()}","status":"Subscribed"}\n`,
      {
        'content-type': 'application/x-ndjson',
      },
    );
    assert.equal(lines.status, 200, lines.raw);
    assert.equal(lines.body.refused.length, 1);
    assert.equal((await contact(gone.id)).status, 'Unsubscribed');
    assert.equal((await contact(angry.id)).status, 'Inactive - Spam Complaint');
    // A file without a status column updates them, and leaves their word alone.
    const names = await csv(`email,first_name\n${gone.email},Ann\n`);
    assert.deepEqual([names.body.updated, names.body.refused.length], [1, 0]);
    assert.equal((await contact(gone.id)).first_name, 'Ann');
    assert.equal((await contact(gone.id)).status, 'Unsubscribed');
  });

  test('deleting and re-creating keeps the suppression of that address, in any case, by any path', async () => {
    const was = (await contact(gone.id)).email_suppression;
    assert.equal((await s.api.delete(`/v3/contacts/${gone.id}`)).status, 200);
    const again = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: gone.email.toUpperCase(), first_name: 'Again' });
    assert.equal(again.status, 201, again.raw);
    assert.equal(again.body.status, 'Unsubscribed');
    assert.deepEqual(again.body.email_suppression, was);
    assert.equal((await s.api.delete(`/v3/contacts/${again.body.id}`)).status, 200);
    // Asked for Subscribed outright: refused, saying why.
    const asked = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: gone.email, status: 'Subscribed' });
    assertProblem(asked, 409, 'conflict');
    assert.match(asked.body.errors.status[0], /own word/);
    // By import.
    const imported = await csv(`email,first_name\n${gone.email},Imported\n`);
    assert.equal(imported.body.created, 1, imported.raw);
    const [row] = (await s.api.get(`/v3/users/${s.owner}/contacts?email=${encodeURIComponent(gone.email)}`)).body.data;
    assert.equal(row.status, 'Unsubscribed');
    assert.deepEqual(row.email_suppression, was);
    // By giving another contact the address.
    assert.equal((await s.api.delete(`/v3/contacts/${row.id}`)).status, 200);
    const moved = await s.api.put(`/v3/contacts/${fresh.id}`, { email: gone.email });
    assert.equal(moved.status, 200, moved.raw);
    assert.equal(moved.body.status, 'Unsubscribed');
    assert.deepEqual(moved.body.email_suppression, was);
  });

  test("what the owner set, the owner may undo; the person's word later overrides it", async () => {
    const made = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'owner-set@example.com', status: 'Unsubscribed' });
    assert.equal(made.body.email_suppression.description, 'Set by the owner');
    const undone = await s.api.put(`/v3/contacts/${made.body.id}`, { status: 'Subscribed' });
    assert.equal(undone.status, 200, undone.raw);
    assert.equal(undone.body.status, 'Subscribed');
    assert.equal((await s.api.delete(`/v3/contacts/${made.body.id}`)).status, 200);
    // An owner's verdict on the address, then the person unsubscribes: their word wins, and stays.
    const people = await audience(s, 1);
    const email = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
    await waitForStatus(s, email.id, ['Sent']);
    const person = people.contacts[0]!;
    const [delivery] = (await s.api.get(`/v3/templated_emails/${email.id}/deliveries`)).body.data;
    assert.equal((await s.api.put(`/v3/contacts/${person.id}`, { status: 'Inactive - Hard Bounce' })).status, 200);
    const now = new Date();
    await recordDeliveryEvents(
      s.t.database.db,
      [{ source: 'hopper', eventId: `unsubscribe:${delivery.id}`, deliveryId: delivery.id, type: 'unsubscribe', occurredAt: now }],
      now,
    );
    const after = await contact(person.id);
    assert.equal(after.status, 'Unsubscribed');
    assert.equal(after.email_suppression.delivery_id, delivery.id);
    assertProblem(await s.api.put(`/v3/contacts/${person.id}`, { status: 'Subscribed' }), 409, 'conflict');
  });
});
