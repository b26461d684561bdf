import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../clients/typescript/src/index.ts';
import { ENDPOINT_DISABLED_EVENT, TEST_EVENT, WEBHOOK_EVENT_TYPES } from '../../src/webhooks/events.ts';
import { EVENT_PAYLOAD_LIMIT, INLINE_TEXT_LIMIT } from '../../src/webhooks/payload-size.ts';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { type EventContract, eventContract } from './support/contract.ts';
import { type Receiver, startReceiver } from './support/receiver.ts';

/**
 * The event contract (docs/webhooks.md): the OpenAPI document's `webhooks` section describes every
 * event type, and every body a real receiver gets — verified with the typed client's verifier —
 * is valid for the operation of its type; bodies stay under the documented size bound.
 */
describe('the webhook event contract', () => {
  let receiver: Receiver;
  let s: SendingApp;
  let contract: EventContract;

  before(async () => {
    receiver = await startReceiver();
    s = await startSendingApp({
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_CA_FILE: receiver.caFile,
      WEBHOOK_RETRY_BASE: '100ms',
      WEBHOOK_POLL_INTERVAL: '50ms',
    });
    contract = await eventContract(s.t.app);
  });
  after(async () => {
    await s?.close();
    await receiver?.close();
  });

  test('the document has one webhook per event type, with the signature headers and an example that fits', () => {
    const types = [...WEBHOOK_EVENT_TYPES, TEST_EVENT, ENDPOINT_DISABLED_EVENT].sort();
    assert.deepEqual(Object.keys(contract.doc.webhooks).sort(), types);
    for (const type of types) {
      const op = contract.doc.webhooks[type].post;
      assert.deepEqual(
        op.parameters.map((p: { name: string; in: string; required: boolean }) => `${p.in}:${p.name}:${p.required}`),
        ['header:webhook-id:true', 'header:webhook-timestamp:true', 'header:webhook-signature:true'],
      );
      const media = op.requestBody.content['application/json'];
      assert.match(JSON.stringify(media.schema), /#\/components\/schemas\/\w+Event"/, `${type} names a shared component`);
      const [example] = Object.values(media.examples) as { value: Record<string, unknown> }[];
      assert.equal(example?.value.type, type);
      contract.check(example?.value ?? {});
      // Another type's example is refused: each operation fixes its type.
      assert.throws(() => contract.check({ ...example?.value, type: type === TEST_EVENT ? 'contact.created' : TEST_EVENT }));
    }
    // The resources' own components are shared, not copied.
    const data = contract.doc.components.schemas.TemplatedEmailEventData.properties;
    assert.deepEqual(data.reporting, { $ref: '#/components/schemas/Reporting' });
    assert.deepEqual(data.recipients.items, { $ref: '#/components/schemas/Recipient' });
  });

  test('every event a receiver gets is signed, valid for its type in the document, and under the size bound', async () => {
    const created = await s.api.post(`/v3/users/${s.owner}/webhooks`, {
      url: receiver.url,
      events: [...WEBHOOK_EVENT_TYPES],
    });
    assert.equal(created.status, 201, created.raw);
    const secret: string = created.body.secret;

    // Contacts: created, updated, status_changed, unsubscribed, deleted.
    const people = await audience(s, 2);
    const one = people.contacts[0] as { id: number };
    assert.equal((await s.api.put(`/v3/contacts/${one.id}`, { status: 'Unsubscribed' })).status, 200);
    const other = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'gone@example.com' });
    assert.equal((await s.api.delete(`/v3/contacts/${other.body.id}`)).status, 200);

    // A templated email with a 250 KiB body to the other contact: scheduled, sending, sent, delivery.sent.
    const paragraph = '<p>Spring listings near you: three bedrooms, a garden and a garage, close to the schools.</p>';
    const body = paragraph.repeat(Math.ceil((250 * 1024) / paragraph.length)).slice(0, 250 * 1024 - 4);
    const email = await createEmail(s, { status: 'Scheduled', body, recipients: toTag(people) });
    await waitForStatus(s, email.id, ['Sent']);
    // A click on it (what the tracking redirect records).
    const delivery = await s.t.database.db
      .selectFrom('deliveries')
      .select('id')
      .where('message_id', '=', email.id)
      .where('message_kind', '=', 'templated_email')
      .executeTakeFirstOrThrow();
    await s.t.database.db
      .insertInto('delivery_events')
      .values({
        source: 'tracking',
        event_id: `click-${delivery.id}`,
        delivery_id: delivery.id,
        type: 'click',
        occurred_at: new Date(),
        detail: 'https://listings.example/spring',
        received_at: new Date(),
      })
      .execute();
    assert.equal((await s.api.post(`/v3/webhooks/${created.body.id}/test`)).status, 202);

    const expected = [
      'contact.created',
      'contact.status_changed',
      'contact.unsubscribed',
      'contact.deleted',
      'templated_email.scheduled',
      'templated_email.sending',
      'templated_email.sent',
      'delivery.sent',
      'delivery.clicked',
      TEST_EVENT,
    ];
    const events = await waitFor('every kind of event', () => {
      const got = receiver.received.map((r) => {
        const event = verifyWebhook(secret, r.body, r.headers);
        assert.ok(Buffer.byteLength(r.body) < EVENT_PAYLOAD_LIMIT, `${event.type}: ${Buffer.byteLength(r.body)} bytes`);
        return contract.check(r.body);
      });
      return expected.every((type) => got.some((e) => e.type === type)) && got;
    });
    for (const event of events) assert.equal(event.user_id, s.owner);

    // The email's events leave out the 250 KiB body and its text, and say where to read them.
    const emailEvents = events.filter((e) => e.type.startsWith('templated_email.'));
    assert.equal(emailEvents.length, 3);
    for (const event of emailEvents) {
      assert.deepEqual(event.data.omitted, ['body', 'text']);
      assert.equal(event.data.body, undefined);
      assert.equal(event.data.subject, email.subject);
      assert.equal(event.data.href, `${s.t.config.publicUrl}/v3/templated_emails/${email.id}`);
    }
    const read = await s.api.get(new URL(emailEvents[0]?.data.href).pathname);
    assert.equal(read.status, 200);
    assert.ok(Buffer.byteLength(read.body.body) > INLINE_TEXT_LIMIT);
    // A contact's event is whole (nothing bulky to leave out).
    const contactEvent = events.find((e) => e.type === 'contact.created');
    assert.equal(contactEvent?.data.omitted, undefined);
    assert.ok(Array.isArray(contactEvent?.data.tags));
    const sizes = receiver.received.map((r) => Buffer.byteLength(r.body));
    console.log(`event bodies: ${sizes.length}, largest ${Math.max(...sizes)} bytes (bound ${EVENT_PAYLOAD_LIMIT})`);
    // A tampered body fails the client's verifier.
    const first = receiver.received[0] as { body: string; headers: Record<string, string> };
    assert.throws(() => verifyWebhook(secret, `${first.body} `, first.headers), /signature/i);
  });
});
