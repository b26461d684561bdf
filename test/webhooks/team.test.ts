import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { verifyWebhook } from '../../clients/typescript/src/index.ts';
import { type SendingApp, startSendingApp } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import { type EventContract, eventContract } from './support/contract.ts';
import { type Receiver, startReceiver } from './support/receiver.ts';

/**
 * Team and service endpoints (docs/webhooks.md): one endpoint hears every member of a team (made
 * by its Team Administrator), or every user (an Administrator's); each event names its user.
 */
describe('team and service webhook endpoints', () => {
  let receiver: Receiver;
  let service: Receiver;
  let s: SendingApp;
  let contract: EventContract;
  let teamAdmin: Actor;
  let ann: Actor;
  let bob: Actor;
  let outsider: Actor;

  before(async () => {
    receiver = await startReceiver();
    service = await startReceiver();
    s = await startSendingApp({
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_CA_FILE: receiver.caFile,
      WEBHOOK_RETRY_BASE: '100ms',
      WEBHOOK_POLL_INTERVAL: '50ms',
    });
    contract = await eventContract(s.t.app);
    const team = await createTeam(s.t);
    teamAdmin = await createUser(s.t, 'Team Administrator', team);
    ann = await createUser(s.t, 'User', team);
    bob = await createUser(s.t, 'User', team);
    outsider = await createUser(s.t, 'User');
  });
  after(async () => {
    for (const request of [...(receiver?.received ?? []), ...(service?.received ?? [])]) contract.check(request.body);
    await s?.close();
    await receiver?.close();
    await service?.close();
  });

  const contactOf = async (who: Actor, email: string) => {
    const reply = await asKey(s.t.app, who.key).post(`/v3/users/${who.id}/contacts`, { email });
    assert.equal(reply.status, 201, reply.raw);
    return reply.body.id as number;
  };

  test("a team endpoint receives two members' events, each naming its user, and no one else's", async () => {
    const since = new Date();
    const api = asKey(s.t.app, teamAdmin.key);
    const created = await api.post(`/v3/users/${teamAdmin.id}/webhooks`, { url: receiver.url, events: ['contact.created'], scope: 'team' });
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.scope, 'team');
    assert.equal(created.body.team_id, teamAdmin.teamId);
    const annContact = await contactOf(ann, 'ann-client@example.com');
    const bobContact = await contactOf(bob, 'bob-client@example.com');
    await contactOf(outsider, 'outsider-client@example.com');
    const got = await waitFor("both members' events", () => receiver.received.length >= 2 && receiver.received);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(receiver.received.length, 2, "nothing of the outsider's");
    const events = got.map((r) => verifyWebhook(created.body.secret, r.body, r.headers));
    const byUser = new Map(events.map((e) => [e.user_id, (e.data as { id: number; user_id: number }).id]));
    assert.deepEqual(
      byUser,
      new Map([
        [ann.id, annContact],
        [bob.id, bobContact],
      ]),
    );
    for (const e of events) assert.equal((e.data as { user_id: number }).user_id, e.user_id);

    // Recovery covers the team: resending since the start sends the two members' events again.
    const resent = await api.post(`/v3/webhooks/${created.body.id}/resend`, { since: since.toISOString() });
    assert.equal(resent.status, 202, resent.raw);
    assert.equal(resent.body.queued, 2);
    await waitFor('the two again', () => receiver.received.length >= 4);
    // A member's own key may read it (it is their team's), but not an outsider's.
    assert.equal((await asKey(s.t.app, outsider.key).get(`/v3/webhooks/${created.body.id}`)).status, 403);
  });

  test('who may make them: a User no team endpoint, a Team Administrator no service endpoint; an Administrator a service endpoint hearing everyone', async () => {
    const asAnn = asKey(s.t.app, ann.key);
    const refused = await asAnn.post(`/v3/users/${ann.id}/webhooks`, { url: receiver.url, events: ['contact.created'], scope: 'team' });
    assert.equal(refused.status, 403, refused.raw);
    const notService = await asKey(s.t.app, teamAdmin.key).post(`/v3/users/${teamAdmin.id}/webhooks`, {
      url: receiver.url,
      events: ['contact.created'],
      scope: 'service',
    });
    assert.equal(notService.status, 403, notService.raw);
    const noTeam = await s.api.post(`/v3/users/${outsider.id}/webhooks`, { url: receiver.url, events: ['contact.created'], scope: 'team' });
    assert.equal(noTeam.status, 400, noTeam.raw);
    const badScope = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url: receiver.url, events: ['contact.created'], scope: 'world' });
    assert.equal(badScope.status, 400, badScope.raw);
    const everyone = await s.api.post(`/v3/users/${s.owner}/webhooks`, { url: service.url, events: ['contact.created'], scope: 'service' });
    assert.equal(everyone.status, 201, everyone.raw);
    // The scope is fixed once made.
    const changed = await s.api.put(`/v3/webhooks/${everyone.body.id}`, { scope: 'user' });
    assert.equal(changed.status, 200, changed.raw);
    assert.equal(changed.body.scope, 'service');
    await contactOf(outsider, 'outsider-2@example.com');
    await contactOf(ann, 'ann-2@example.com');
    const got = await waitFor('both users’ events at the service endpoint', () => service.received.length >= 2 && service.received);
    const users = got.map((r) => verifyWebhook(everyone.body.secret, r.body, r.headers).user_id).sort();
    assert.deepEqual(users, [ann.id, outsider.id].sort());
    await s.api.delete(`/v3/webhooks/${everyone.body.id}`);
  });
});
