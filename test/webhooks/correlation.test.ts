import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../clients/typescript/src/index.ts';
import { upload, wavFile } from '../media/fixtures.ts';
import { audience, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { createUser } from '../support/factories.ts';
import { type EventContract, eventContract } from './support/contract.ts';
import { type Receiver, startReceiver } from './support/receiver.ts';

type Correlated = { id: number; external_id: string | null; metadata: Record<string, string> };
type DeliveryData = { message_id: number; message_external_id: string | null; message_metadata: Record<string, string> };

/** Correlation (docs/webhooks.md): a contact's external_id, unique per owner and searchable, round-trips into its events. */
describe('external_id on contacts', () => {
  let receiver: Receiver;
  let s: SendingApp;
  let contract: EventContract;

  before(async () => {
    receiver = await startReceiver();
    s = await startSendingApp({ WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_CA_FILE: receiver.caFile, WEBHOOK_POLL_INTERVAL: '50ms' });
    contract = await eventContract(s.t.app);
  });
  after(async () => {
    for (const request of receiver?.received ?? []) contract.check(request.body);
    await s?.close();
    await receiver?.close();
  });

  test('round-trips into the events, is searchable, and is unique among the owner’s live contacts', async () => {
    const endpoint = await s.api.post(`/v3/users/${s.owner}/webhooks`, {
      url: receiver.url,
      events: ['contact.created', 'contact.updated'],
    });
    assert.equal(endpoint.status, 201, endpoint.raw);
    const created = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'crm@example.com', external_id: 'crm-0001' });
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.external_id, 'crm-0001');
    const updated = await s.api.put(`/v3/contacts/${created.body.id}`, { external_id: 'crm-0002' });
    assert.equal(updated.status, 200, updated.raw);
    const got = await waitFor('two events', () => receiver.received.length >= 2 && receiver.received);
    const events = got.map((r) => verifyWebhook(endpoint.body.secret, r.body, r.headers));
    const byType = new Map(events.map((e) => [e.type, (e.data as unknown as { external_id: string }).external_id]));
    assert.equal(byType.get('contact.created'), 'crm-0001');
    assert.equal(byType.get('contact.updated'), 'crm-0002');

    const found = await s.api.get(`/v3/users/${s.owner}/contacts?external_id=crm-0002`);
    assert.equal(found.status, 200, found.raw);
    assert.deepEqual(
      found.body.data.map((c: { id: number }) => c.id),
      [created.body.id],
    );
    assert.equal((await s.api.get(`/v3/users/${s.owner}/contacts?external_id=crm-0001`)).body.data.length, 0);

    // A second live contact of the owner with it: 409 naming the holder; with and without tags, on create and update.
    for (const body of [
      { email: 'other@example.com', external_id: 'crm-0002' },
      { email: 'other@example.com', external_id: 'crm-0002', tags: ['CRM'] },
    ]) {
      const clash = await s.api.post(`/v3/users/${s.owner}/contacts`, body);
      assert.equal(clash.status, 409, clash.raw);
      assert.match(clash.body.errors.external_id[0], new RegExp(`contact ${created.body.id}`));
    }
    const other = await s.api.post(`/v3/users/${s.owner}/contacts`, { phone: '7272329117', external_id: 'crm-0003' });
    assert.equal(other.status, 201, other.raw);
    for (const body of [{ external_id: 'crm-0002' }, { external_id: 'crm-0002', email: 'third@example.com' }]) {
      const clash = await s.api.put(`/v3/contacts/${other.body.id}`, body);
      assert.equal(clash.status, 409, clash.raw);
    }
    // Bad values are 400s.
    for (const external_id of ['', 'x'.repeat(256), 5, { id: 1 }]) {
      const reply = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'bad@example.com', external_id });
      assert.equal(reply.status, 400, `${JSON.stringify(external_id)}: ${reply.raw}`);
    }
    // Another owner may use the same id; a deleted contact frees it.
    const someone = await createUser(s.t, 'User');
    const theirs = await asKey(s.t.app, someone.key).post(`/v3/users/${someone.id}/contacts`, {
      email: 'x@example.com',
      external_id: 'crm-0002',
    });
    assert.equal(theirs.status, 201, theirs.raw);
    assert.equal((await s.api.delete(`/v3/contacts/${created.body.id}`)).status, 200);
    const again = await s.api.post(`/v3/users/${s.owner}/contacts`, { email: 'again@example.com', external_id: 'crm-0002' });
    assert.equal(again.status, 201, again.raw);
    await s.api.delete(`/v3/webhooks/${endpoint.body.id}`);
  });
});

/**
 * Correlation of messages (docs/webhooks.md, "Correlation"): a templated email's or voicemail
 * drop's external_id (unique per owner and kind, searchable) and metadata round-trip into the
 * message's events, its deliveries' listing and every delivery.* event.
 */
describe('external_id and metadata on messages', () => {
  let receiver: Receiver;
  let s: SendingApp;
  let contract: EventContract;

  before(async () => {
    receiver = await startReceiver();
    s = await startSendingApp({ WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_CA_FILE: receiver.caFile, WEBHOOK_POLL_INTERVAL: '50ms' });
    contract = await eventContract(s.t.app);
  });
  after(async () => {
    for (const request of receiver?.received ?? []) contract.check(request.body);
    await s?.close();
    await receiver?.close();
  });

  test('a templated email’s external_id and metadata reach its events, its deliveries and their events', async () => {
    const endpoint = await s.api.post(`/v3/users/${s.owner}/webhooks`, {
      url: receiver.url,
      events: ['templated_email.scheduled', 'templated_email.sent', 'delivery.sent'],
    });
    assert.equal(endpoint.status, 201, endpoint.raw);
    const to = await audience(s, 2);
    const metadata = { crm_campaign: 'spring-2027', 'deal id': 'D-17' };
    const saved = await s.api.post(`/v3/users/${s.owner}/templated_emails`, {
      subject: 'Spring market',
      body: '<p>Hello {{first_name}}</p>',
      recipients: toTag(to),
      external_id: 'camp-1',
      metadata,
    });
    assert.equal(saved.status, 201, saved.raw);
    assert.equal(saved.body.external_id, 'camp-1');
    assert.deepEqual(saved.body.metadata, metadata);
    // Changed on update (the whole object replaced), then sent.
    const next = { crm_campaign: 'spring-2027b' };
    const sent = await s.api.put(`/v3/templated_emails/${saved.body.id}`, {
      external_id: 'camp-2',
      metadata: next,
      status: 'Scheduled',
      send_type: 'Now',
    });
    assert.equal(sent.status, 200, sent.raw);
    assert.deepEqual([sent.body.external_id, sent.body.metadata], ['camp-2', next]);
    assert.deepEqual((await s.api.get(`/v3/templated_emails/${saved.body.id}`)).body.metadata, next);
    await waitForStatus(s, saved.body.id, ['Sent']);

    const got = await waitFor('scheduled, sent and two delivery.sent events', () => receiver.received.length >= 4 && receiver.received);
    const events = got.map((r) => verifyWebhook(endpoint.body.secret, r.body, r.headers));
    const messageEvents = events.filter((e) => e.type.startsWith('templated_email.'));
    assert.deepEqual(messageEvents.map((e) => e.type).sort(), ['templated_email.scheduled', 'templated_email.sent']);
    for (const event of messageEvents) {
      const data = event.data as unknown as Correlated;
      assert.deepEqual([data.id, data.external_id, data.metadata], [saved.body.id, 'camp-2', next], event.type);
    }
    const deliveryEvents = events.filter((e) => e.type === 'delivery.sent');
    assert.equal(deliveryEvents.length, 2);
    for (const event of deliveryEvents) {
      const data = event.data as unknown as DeliveryData;
      assert.deepEqual([data.message_id, data.message_external_id, data.message_metadata], [saved.body.id, 'camp-2', next]);
    }

    const listed = await s.api.get(`/v3/templated_emails/${saved.body.id}/deliveries`);
    assert.equal(listed.status, 200, listed.raw);
    assert.equal(listed.body.data.length, 2);
    for (const delivery of listed.body.data as DeliveryData[]) {
      assert.deepEqual([delivery.message_external_id, delivery.message_metadata], ['camp-2', next]);
    }

    // Searchable; unique among the owner's live templated emails (409 naming the holder).
    const found = await s.api.get(`/v3/users/${s.owner}/templated_emails?external_id=camp-2`);
    assert.deepEqual(
      found.body.data.map((e: Correlated) => e.id),
      [saved.body.id],
    );
    assert.equal((await s.api.get(`/v3/users/${s.owner}/templated_emails?external_id=camp-1`)).body.data.length, 0);
    const clash = await s.api.post(`/v3/users/${s.owner}/templated_emails`, { subject: 'x', body: '<p>x</p>', external_id: 'camp-2' });
    assert.equal(clash.status, 409, clash.raw);
    assert.match(clash.body.errors.external_id[0], new RegExp(`templated email ${saved.body.id}$`));
    const other = await s.api.post(`/v3/users/${s.owner}/templated_emails`, { subject: 'x', body: '<p>x</p>', external_id: 'camp-3' });
    assert.equal(other.status, 201, other.raw);
    const moved = await s.api.put(`/v3/templated_emails/${other.body.id}`, { external_id: 'camp-2' });
    assert.equal(moved.status, 409, moved.raw);
    // null clears both.
    const cleared = await s.api.put(`/v3/templated_emails/${other.body.id}`, { external_id: null, metadata: null });
    assert.equal(cleared.status, 200, cleared.raw);
    assert.deepEqual([cleared.body.external_id, cleared.body.metadata], [null, {}]);
    await s.api.delete(`/v3/webhooks/${endpoint.body.id}`);
  });

  test('a voicemail drop’s external_id and metadata reach its events and the listing; one id per kind', async () => {
    const endpoint = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url: receiver.url, events: ['voicemail_drop.scheduled'] });
    assert.equal(endpoint.status, 201, endpoint.raw);
    const before = receiver.received.length;
    const media = await upload(s.t.app, s.t.adminKey, s.owner, 'listing.wav', wavFile(6));
    const contact = await s.api.post(`/v3/users/${s.owner}/contacts`, { phone: '7272329118' });
    const metadata = { lead: 'L-9' };
    const drop = await s.api.post(`/v3/users/${s.owner}/voicemail_drops`, {
      provider: 'Sandbox',
      media_id: media.id,
      callback_number: '(727) 232-9117',
      name: 'New listing',
      recipients: [{ group: 'Contacts', value: contact.body.id }],
      status: 'Scheduled',
      send_type: 'Future',
      send_at: new Date(Date.now() + 30 * 86_400_000).toISOString(),
      // The same id as a templated email's: ids are unique per kind.
      external_id: 'camp-2',
      metadata,
    });
    assert.equal(drop.status, 201, drop.raw);
    assert.deepEqual([drop.body.external_id, drop.body.metadata], ['camp-2', metadata]);
    const [request] = await waitFor('voicemail_drop.scheduled', () => receiver.received.length > before && receiver.received.slice(before));
    assert.ok(request);
    const event = verifyWebhook(endpoint.body.secret, request.body, request.headers);
    assert.equal(event.type, 'voicemail_drop.scheduled');
    const data = event.data as unknown as Correlated;
    assert.deepEqual([data.id, data.external_id, data.metadata], [drop.body.id, 'camp-2', metadata]);

    const found = await s.api.get(`/v3/users/${s.owner}/voicemail_drops?external_id=camp-2`);
    assert.equal(found.status, 200, found.raw);
    assert.deepEqual(
      found.body.data.map((d: Correlated) => [d.id, d.metadata]),
      [[drop.body.id, metadata]],
    );
    const clash = await s.api.post(`/v3/users/${s.owner}/voicemail_drops`, {
      provider: 'Sandbox',
      media_id: media.id,
      callback_number: '(727) 232-9117',
      name: 'Again',
      external_id: 'camp-2',
    });
    assert.equal(clash.status, 409, clash.raw);
    assert.match(clash.body.errors.external_id[0], new RegExp(`voicemail drop ${drop.body.id}$`));
    // Metadata can change while the drop waits, and the deleted drop frees its id.
    const updated = await s.api.put(`/v3/voicemail_drops/${drop.body.id}`, { metadata: { lead: 'L-10' } });
    assert.equal(updated.status, 200, updated.raw);
    assert.deepEqual(updated.body.metadata, { lead: 'L-10' });
    const unscheduled = await s.api.put(`/v3/voicemail_drops/${drop.body.id}`, { status: 'Saved' });
    assert.equal(unscheduled.status, 200, unscheduled.raw);
    assert.equal((await s.api.delete(`/v3/voicemail_drops/${drop.body.id}`)).status, 200);
    const again = await s.api.post(`/v3/users/${s.owner}/voicemail_drops`, {
      provider: 'Sandbox',
      media_id: media.id,
      callback_number: '(727) 232-9117',
      name: 'Again',
      external_id: 'camp-2',
    });
    assert.equal(again.status, 201, again.raw);
    await s.api.delete(`/v3/webhooks/${endpoint.body.id}`);
  });

  test('a voicemail drop’s deliveries carry its external_id and metadata, listed and in delivery.* events', async () => {
    const endpoint = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url: receiver.url, events: ['delivery.sent'] });
    assert.equal(endpoint.status, 201, endpoint.raw);
    const before = receiver.received.length;
    const media = await upload(s.t.app, s.t.adminKey, s.owner, 'listing.wav', wavFile(6));
    // A time zone where it is midday now, so calling hours let the drop go at once.
    const offset = 12 - new Date().getUTCHours();
    const zone = offset === 0 ? 'Etc/GMT' : `Etc/GMT${offset > 0 ? '-' : '+'}${Math.abs(offset)}`;
    const contact = await s.api.post(`/v3/users/${s.owner}/contacts`, { phone: '7272329119', time_zone: zone });
    assert.equal(contact.status, 201, contact.raw);
    const metadata = { lead: 'L-11', source: 'zillow' };
    const drop = await s.api.post(`/v3/users/${s.owner}/voicemail_drops`, {
      provider: 'Sandbox',
      media_id: media.id,
      callback_number: '(727) 232-9117',
      name: 'Price drop',
      recipients: [{ group: 'Contacts', value: contact.body.id }],
      status: 'Scheduled',
      send_type: 'Now',
      external_id: 'drop-now',
      metadata,
    });
    assert.equal(drop.status, 201, drop.raw);
    const listed = await waitFor('the drop’s delivery', async () => {
      const reply = await s.api.get(`/v3/voicemail_drops/${drop.body.id}/deliveries`);
      return reply.body.data?.length === 1 && reply.body.data;
    });
    assert.deepEqual([listed[0].message_external_id, listed[0].message_metadata], ['drop-now', metadata]);
    const [request] = await waitFor(
      'delivery.sent of the drop',
      () => receiver.received.length > before && receiver.received.slice(before),
    );
    assert.ok(request);
    const event = verifyWebhook(endpoint.body.secret, request.body, request.headers);
    assert.equal(event.type, 'delivery.sent');
    const data = event.data as unknown as DeliveryData & { message_kind: string };
    assert.deepEqual(
      [data.message_kind, data.message_id, data.message_external_id, data.message_metadata],
      ['voicemail_drop', drop.body.id, 'drop-now', metadata],
    );
    await s.api.delete(`/v3/webhooks/${endpoint.body.id}`);
  });

  test('bad external_id and metadata are 400s naming the field', async () => {
    const tooMany = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v']));
    // 9 keys of 500 characters: each within bounds, 4.5 KB in all.
    const tooBig = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`k${i}`, 'v'.repeat(500)]));
    const cases: [string, unknown][] = [
      ['metadata', tooMany],
      ['metadata', { n: 5 }],
      ['metadata', { nested: { a: 'b' } }],
      ['metadata', { ['k'.repeat(41)]: 'v' }],
      ['metadata', { '': 'v' }],
      ['metadata', { k: 'v'.repeat(501) }],
      ['metadata', tooBig],
      ['metadata', ['a', 'b']],
      ['metadata', 'text'],
      ['external_id', ''],
      ['external_id', 'x'.repeat(256)],
      ['external_id', 7],
      ['external_id', { id: 1 }],
    ];
    const media = await upload(s.t.app, s.t.adminKey, s.owner, 'listing.wav', wavFile(6));
    const dropBody = { provider: 'Sandbox', media_id: media.id, callback_number: '(727) 232-9117', name: 'x' };
    for (const [field, value] of cases) {
      const email = await s.api.post(`/v3/users/${s.owner}/templated_emails`, { subject: 'x', body: '<p>x</p>', [field]: value });
      assert.equal(email.status, 400, `${field} ${JSON.stringify(value).slice(0, 80)}: ${email.raw}`);
      assert.match(email.raw, new RegExp(field), email.raw);
      const drop = await s.api.post(`/v3/users/${s.owner}/voicemail_drops`, { ...dropBody, [field]: value });
      assert.equal(drop.status, 400, drop.raw);
      assert.match(drop.raw, new RegExp(field), drop.raw);
    }
    const many = await s.api.post(`/v3/users/${s.owner}/templated_emails`, { subject: 'x', body: '<p>x</p>', metadata: tooMany });
    assert.deepEqual(many.body.errors, { metadata: ['must have at most 20 keys'] });
    const longKey = await s.api.post(`/v3/users/${s.owner}/voicemail_drops`, { ...dropBody, metadata: { ['k'.repeat(41)]: 'v' } });
    assert.deepEqual(longKey.body.errors, { metadata: [`key "${'k'.repeat(41)}": must be at most 40 characters`] });
    const notString = await s.api.post(`/v3/users/${s.owner}/voicemail_drops`, { ...dropBody, metadata: { n: 5 } });
    assert.deepEqual(notString.body.errors, { 'metadata.n': ['must be a string'] });
    const big = await s.api.post(`/v3/users/${s.owner}/templated_emails`, { subject: 'x', body: '<p>x</p>', metadata: tooBig });
    assert.match(big.body.errors.metadata[0], /at most 4096 bytes/);
    // Within every bound: 20 keys of 40 characters, 4 KB in all.
    const full = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`${i}`.padStart(40, 'k'), 'v'.repeat(150)]));
    const ok = await s.api.post(`/v3/users/${s.owner}/templated_emails`, { subject: 'x', body: '<p>x</p>', metadata: full });
    assert.equal(ok.status, 201, ok.raw);
    assert.deepEqual(ok.body.metadata, full);
  });
});
