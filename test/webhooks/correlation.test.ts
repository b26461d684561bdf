import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../clients/typescript/src/index.ts';
import { type SendingApp, startSendingApp } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { createUser } from '../support/factories.ts';
import { type EventContract, eventContract } from './support/contract.ts';
import { type Receiver, startReceiver } from './support/receiver.ts';

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
