import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Receiver, startReceiver } from '../webhooks/support/receiver.ts';
import { FakeDropCowboy } from './support/fake-drop-cowboy.ts';
import { FakeSlybroadcast } from './support/fake-slybroadcast.ts';
import { sendDrop, startVoicemailApp, type VoicemailApp, waitFor, waitForDrop } from './support/voicemail-app.ts';

const DC = { key: 'dc-key-outcomes', secret: 'dc-secret-outcomes' };
const WEBHOOK_SECRETS = ['whsec_outcomes'];
const SLY = { uid: 'agent@example.com', password: 'sly-outcomes' };

/**
 * Voicemail outcomes end to end, for each provider against its stand-in: the reason of every
 * result in the deliveries listing and in the `delivery.*` webhooks; a dead number (landline,
 * Do-Not-Call, not reachable, no consent) suppressing the contact's phone, visible on the contact
 * and in `contact.updated`; the next drop skipping it with that reason; an owner lifting it.
 * Temporary results (mailbox full) suppress nothing.
 */
describe('voicemail outcomes: reasons shown, dead numbers suppressed', () => {
  let app: VoicemailApp;
  let dc: FakeDropCowboy;
  let sly: FakeSlybroadcast;
  let receiver: Receiver;
  before(async () => {
    receiver = await startReceiver();
    // Drop Cowboy's clock is the app's (its signatures carry the time).
    dc = new FakeDropCowboy({ ...DC, webhookSecrets: WEBHOOK_SECRETS, ca: '', now: () => (app ? app.clock.now() : new Date()) });
    await dc.listen();
    sly = new FakeSlybroadcast(SLY, '');
    await sly.listen();
    app = await startVoicemailApp({
      DROPCOWBOY_KEY: DC.key,
      DROPCOWBOY_SECRET: DC.secret,
      DROPCOWBOY_WEBHOOK_SECRETS: WEBHOOK_SECRETS.join(','),
      DROPCOWBOY_URL: dc.url,
      SLYBROADCAST_UID: SLY.uid,
      SLYBROADCAST_PASSWORD: SLY.password,
      SLYBROADCAST_URL: sly.url,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_CA_FILE: receiver.caFile,
      WEBHOOK_POLL_INTERVAL: '50ms',
    });
    dc.trust(app.ca);
    sly.trust(app.ca);
    const hook = await api().post(`/v3/users/${app.owner.id}/webhooks`, {
      url: receiver.url,
      events: ['delivery.failed', 'delivery.delivered', 'contact.updated'],
    });
    assert.equal(hook.status, 201, hook.raw);
  });
  after(async () => {
    await app?.close();
    await dc?.close();
    await sly?.close();
    await receiver?.close();
  });

  const api = () => asKey(app.t.app, app.owner.key);
  const listing = async (dropId: number) => {
    const reply = await api().get(`/v3/voicemail_drops/${dropId}/deliveries?per_page=100`);
    assert.equal(reply.status, 200, reply.raw);
    return reply.body.data as any[];
  };
  const byAddress = async (dropId: number) => new Map((await listing(dropId)).map((d) => [d.address as string, d]));
  const contact = async (id: number) => (await api().get(`/v3/contacts/${id}`)).body;
  const hooks = () => receiver.received.map((r) => JSON.parse(r.body));
  /** The `delivery.*` webhook of a delivery, once it came. */
  const deliveryHook = (type: string, deliveryId: number) =>
    waitFor(`${type} of delivery ${deliveryId}`, () => hooks().find((e) => e.type === type && e.data.id === deliveryId));
  /** A drop to the same contacts again (by id). */
  const again = async (provider: string, contactIds: number[], mediaId: number) => {
    const made = await api().post(`/v3/users/${app.owner.id}/voicemail_drops`, {
      provider,
      media_id: mediaId,
      callback_number: '(727) 232-9117',
      name: 'Again',
      recipients: contactIds.map((value) => ({ group: 'Contacts', value })),
      status: 'Scheduled',
      send_type: 'Now',
    });
    assert.equal(made.status, 201, made.raw);
    return made.body.id as number;
  };
  /** The next drop: suppressed numbers skipped with their reason, the others handed over. */
  const assertNextDropSkips = async (provider: string, first: Map<string, any>, suppressed: Record<string, string>, mediaId: number) => {
    const ids = [...first.values()].map((d) => d.contact_id as number);
    const id = await again(provider, ids, mediaId);
    const expectedSent = first.size - Object.keys(suppressed).length;
    await waitForDrop(app, id, 'the second drop to be handed over', (d) => d.status === 'Sent' && d.reporting.sent === expectedSent);
    const second = await byAddress(id);
    for (const [address, delivery] of second) {
      const reason = suppressed[address];
      if (!reason) {
        assert.notEqual(delivery.state, 'skipped', address);
        continue;
      }
      assert.equal(delivery.state, 'skipped', address);
      assert.match(delivery.last_error, new RegExp(`^skipped: the phone number is suppressed \\(${reason} since \\d{4}-`), address);
      assert.deepEqual([delivery.outcome.classification, delivery.outcome.code, delivery.outcome.source], ['suppressed', reason, 'hopper']);
    }
    return id;
  };

  test('Sandbox: each ending its reason; a landline and a DNC hit suppress the number, a full mailbox does not; lifted in bulk', async () => {
    const drop = await sendDrop(app, 'Sandbox', [
      { phone: '7275559117' },
      { phone: '7275550000' },
      { phone: '7275550001' },
      { phone: '7275550002' },
      { phone: '7275550003' },
    ]);
    await waitForDrop(app, drop.id, 'the Sandbox outcomes', (d) => d.reporting.delivered + d.reporting.failed === 5);
    const first = await byAddress(drop.id);
    const expected: Record<string, [string, string, boolean, string]> = {
      '7275559117': ['delivered', 'delivered', false, 'delivered'],
      '7275550000': ['failed', 'no_voicemail_box', false, 'no_voicemail'],
      '7275550001': ['failed', 'landline', true, 'landline'],
      '7275550002': ['failed', 'mailbox_full', false, 'mailbox_full'],
      '7275550003': ['failed', 'dnc', true, 'dnc'],
    };
    for (const [address, [state, classification, permanent, code]] of Object.entries(expected)) {
      const delivery = first.get(address);
      assert.deepEqual(
        [delivery.state, delivery.outcome?.classification, delivery.outcome?.permanent, delivery.outcome?.code, delivery.outcome?.source],
        [state, classification, permanent, code, 'sandbox'],
        address,
      );
      assert.match(delivery.outcome.at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      if (state === 'failed') {
        assert.match(delivery.last_error, new RegExp(`Sandbox: numbers ending in ${address.slice(-4)} always fail`), address);
        // The webhook of the move carries the same reason.
        const hook = await deliveryHook('delivery.failed', delivery.id);
        assert.deepEqual(hook.data.outcome, delivery.outcome, address);
        assert.equal(hook.data.last_error, delivery.last_error);
      } else {
        assert.equal(delivery.last_error, null);
        assert.deepEqual((await deliveryHook('delivery.delivered', delivery.id)).data.outcome, delivery.outcome);
      }
    }

    // Dead numbers are suppressed on the contact, with the reason and the time, and contact.updated says so.
    for (const address of ['7275550001', '7275550003']) {
      const delivery = first.get(address);
      const suppression = (await contact(delivery.contact_id)).phone_suppression;
      assert.equal(suppression.reason, expected[address]?.[1]);
      assert.equal(suppression.delivery_id, delivery.id);
      assert.match(suppression.at, /^\d{4}-\d{2}-\d{2}T/);
      const updated = await waitFor(`contact.updated of ${address}`, () =>
        hooks().find((e) => e.type === 'contact.updated' && e.data.id === delivery.contact_id && e.data.phone_suppression),
      );
      assert.equal(updated.data.phone_suppression.reason, expected[address]?.[1]);
      assert.equal((await contact(delivery.contact_id)).status, 'Subscribed', 'the email side is untouched');
    }
    for (const address of ['7275559117', '7275550000', '7275550002']) {
      assert.equal((await contact(first.get(address).contact_id)).phone_suppression, null, `${address} is not suppressed`);
    }

    await assertNextDropSkips('Sandbox', first, { '7275550001': 'landline', '7275550003': 'dnc' }, drop.media.id);

    // Lifted in bulk by reason: the number receives again.
    const lifted = await api().post(`/v3/users/${app.owner.id}/suppressions/lift`, { channel: 'phone', reasons: ['landline', 'dnc'] });
    assert.equal(lifted.status, 200, lifted.raw);
    assert.deepEqual(lifted.body, { lifted: 2 });
    assert.equal((await contact(first.get('7275550001').contact_id)).phone_suppression, null);
  });

  test('Drop Cowboy: 4004 and 6011 suppress the number, 4002 does not; each code and its words in the listing and the webhook', async () => {
    const drop = await sendDrop(app, 'Drop Cowboy', [
      { phone: '7275551201' },
      { phone: '7275551202' },
      { phone: '7275551203' },
      { phone: '7275551204' },
    ]);
    await waitForDrop(app, drop.id, 'the drop to be handed over', (d) => d.status === 'Sent' && d.reporting.sent === 4);
    const url = app.publicUrl;
    const posted = [
      await dc.webhook(url, dc.dropTo('+17275551201'), 'contact.rvm.status', { status: 'success', reason_code: 0 }),
      await dc.webhook(url, dc.dropTo('+17275551202'), 'contact.rvm.status', {
        status: 'failure',
        reason_code: 4004,
        reason: 'Number not reachable',
      }),
      await dc.webhook(url, dc.dropTo('+17275551203'), 'contact.rvm.status', {
        status: 'failure',
        reason_code: 6011,
        reason: 'No consent on file',
      }),
      await dc.callback(dc.dropTo('+17275551204'), { status: 'failure', reason_code: 4002, reason: 'VoiceMail Full' }),
    ];
    for (const reply of posted) assert.deepEqual([reply.status, reply.json], [200, { recorded: 1, duplicates: 0, ignored: 0 }]);
    await waitForDrop(app, drop.id, 'the results', (d) => d.reporting.delivered + d.reporting.failed === 4);
    const first = await byAddress(drop.id);
    const expected: Record<string, [string, string, boolean, string, string | null]> = {
      '7275551201': ['delivered', 'delivered', false, '0', null],
      '7275551202': ['failed', 'invalid_number', true, '4004', 'Number not reachable'],
      '7275551203': ['failed', 'no_consent', true, '6011', 'No consent on file'],
      '7275551204': ['failed', 'mailbox_full', false, '4002', 'VoiceMail Full'],
    };
    for (const [address, [state, classification, permanent, code, description]] of Object.entries(expected)) {
      const delivery = first.get(address);
      assert.deepEqual(
        [
          delivery.state,
          delivery.outcome?.classification,
          delivery.outcome?.permanent,
          delivery.outcome?.code,
          delivery.outcome?.description,
        ],
        [state, classification, permanent, code, description],
        address,
      );
      assert.equal(delivery.outcome.source, 'dropcowboy');
      if (state === 'failed') {
        assert.match(delivery.last_error, new RegExp(`\\[reason code ${code}\\] \\(Drop Cowboy said: ${description}\\)`));
        assert.deepEqual((await deliveryHook('delivery.failed', delivery.id)).data.outcome, delivery.outcome);
      }
    }
    assert.equal((await contact(first.get('7275551202').contact_id)).phone_suppression.reason, 'invalid_number');
    assert.equal((await contact(first.get('7275551203').contact_id)).phone_suppression.reason, 'no_consent');
    assert.equal((await contact(first.get('7275551204').contact_id)).phone_suppression, null);

    const before = dc.drops.length;
    await assertNextDropSkips('Drop Cowboy', first, { '7275551202': 'invalid_number', '7275551203': 'no_consent' }, drop.media.id);
    assert.deepEqual(
      dc.drops
        .slice(before)
        .map((d) => d.body.to)
        .sort(),
      ['+17275551201', '+17275551204'],
      'the suppressed numbers never reached Drop Cowboy',
    );
  });

  test('Slybroadcast: "Landline Removed" and "Do Not Dial List Removed" suppress the number; a full mailbox does not', async () => {
    const phones = ['7275551301', '7275551302', '7275551303', '7275551304'];
    const drop = await sendDrop(
      app,
      'Slybroadcast',
      phones.map((phone) => ({ phone })),
    );
    await waitForDrop(app, drop.id, 'the drop to be handed over', (d) => d.status === 'Sent' && d.reporting.sent === 4);
    const session = (phone: string) => sly.dropTo(phone).sessionId;
    const reply = await sly.dispose([
      // Five columns: no failure reason on a delivered line; the time is still read.
      `${session('7275551301')}|7275551301|OK|2026-01-15 13:05:09|Verizon`,
      `${session('7275551302')}|7275551302|Landline Removed||2026-01-15 13:05:10|`,
      `"${session('7275551303')}"|"7275551303"|"Do Not Dial List Removed"|""|""|""`,
      `${session('7275551304')}|7275551304|FAILED|Mailbox full|2026-01-15 13:05:12|T-Mobile`,
    ]);
    assert.deepEqual([reply.status, reply.body], [200, 'OK']);
    await waitForDrop(app, drop.id, 'the dispositions', (d) => d.reporting.delivered + d.reporting.failed === 4);
    const first = await byAddress(drop.id);
    const expected: Record<string, [string, string, boolean, string]> = {
      '7275551301': ['delivered', 'delivered', false, 'OK'],
      '7275551302': ['failed', 'landline', true, 'Landline Removed'],
      '7275551303': ['failed', 'dnc', true, 'Do Not Dial List Removed'],
      '7275551304': ['failed', 'mailbox_full', false, 'FAILED'],
    };
    for (const [address, [state, classification, permanent, code]] of Object.entries(expected)) {
      const delivery = first.get(address);
      assert.deepEqual(
        [delivery.state, delivery.outcome?.classification, delivery.outcome?.permanent, delivery.outcome?.code, delivery.outcome?.source],
        [state, classification, permanent, code, 'slybroadcast'],
        address,
      );
      if (state === 'failed') assert.deepEqual((await deliveryHook('delivery.failed', delivery.id)).data.outcome, delivery.outcome);
    }
    assert.equal(first.get('7275551304').outcome.description, 'FAILED: Mailbox full');
    assert.equal(first.get('7275551304').last_error, 'Mailbox full');
    // The five-column line's delivery time (Eastern) is when it was delivered.
    assert.equal(first.get('7275551301').delivered_at, '2026-01-15T18:05:09Z');
    assert.equal(first.get('7275551301').outcome.at, '2026-01-15T18:05:09Z');

    assert.equal((await contact(first.get('7275551302').contact_id)).phone_suppression.reason, 'landline');
    assert.equal((await contact(first.get('7275551303').contact_id)).phone_suppression.reason, 'dnc');
    assert.equal((await contact(first.get('7275551304').contact_id)).phone_suppression, null);
    const before = sly.drops.length;
    await assertNextDropSkips('Slybroadcast', first, { '7275551302': 'landline', '7275551303': 'dnc' }, drop.media.id);
    assert.deepEqual(
      sly.drops
        .slice(before)
        .map((d) => d.fields.c_phone)
        .sort(),
      ['7275551301', '7275551304'],
    );
    // Every drop asked Slybroadcast to remove landlines itself.
    assert.ok(sly.drops.every((d) => d.fields.mobile_only === '1'));
  });
});
