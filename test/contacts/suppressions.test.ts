import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { recordDeliveryEvents } from '../../src/sending/delivery-events.ts';
import { DELIVERY, sendEmail } from '../sending/fixtures.ts';
import { asKey } from '../support/client.ts';
import { assertProblem } from '../support/factories.ts';
import { assertShape } from '../support/shapes.ts';
import { sendDrop, startVoicemailApp, type VoicemailApp, waitForDrop } from '../voicemail/support/voicemail-app.ts';
import { CONTACT } from './fixtures.ts';

/**
 * The shared outcome and suppression model (docs/outcomes.md): a delivery keeps why it ended as it
 * did; an outcome that says the address or number is dead suppresses it on the contact, with its
 * reason and time; later sends skip it, saying why; an owner lifts suppressions in bulk.
 */
describe('outcomes and suppressions', () => {
  let app: VoicemailApp;
  before(async () => {
    app = await startVoicemailApp();
  });
  after(() => app.close());

  const api = () => asKey(app.t.app, app.owner.key);
  const contactOf = async (id: number) => (await api().get(`/v3/contacts/${id}`)).body;

  test('a hard bounce keeps its outcome on the delivery and suppresses the email with its reason', async () => {
    const { id, deliveries } = await sendEmail(app.t, app.owner, 2);
    const [bounced, kept] = deliveries as [(typeof deliveries)[0], (typeof deliveries)[0]];
    const at = app.clock.now();
    const result = await recordDeliveryEvents(
      app.t.database.db,
      [
        {
          source: 'dsn',
          eventId: `dsn-${bounced.id}`,
          deliveryId: bounced.id,
          type: 'hard_bounce',
          occurredAt: at,
          detail: '550 5.1.1 user unknown',
          outcome: {
            classification: 'user_unknown',
            permanent: true,
            code: '5.1.1',
            description: '550 5.1.1 <pat@example.com>: user unknown',
          },
        },
      ],
      at,
    );
    assert.equal(result.recorded, 1);
    const listed = await api().get(`/v3/templated_emails/${id}/deliveries?per_page=100`);
    const row = listed.body.data.find((d: { id: number }) => d.id === bounced.id);
    assertShape(row, DELIVERY);
    assert.equal(row.state, 'bounced');
    assert.deepEqual(
      { ...row.outcome, at: undefined },
      {
        classification: 'user_unknown',
        permanent: true,
        code: '5.1.1',
        description: '550 5.1.1 <pat@example.com>: user unknown',
        source: 'dsn',
        at: undefined,
      },
    );
    assert.equal(listed.body.data.find((d: { id: number }) => d.id === kept.id).outcome, null);

    const contact = await contactOf(bounced.contact_id);
    assertShape(contact, CONTACT);
    assert.equal(contact.status, 'Inactive - Hard Bounce');
    assert.deepEqual(
      { ...contact.email_suppression, at: undefined },
      {
        reason: 'hard_bounce',
        at: undefined,
        delivery_id: bounced.id,
        description: '550 5.1.1 <pat@example.com>: user unknown',
      },
    );
    assert.match(contact.email_suppression.at, /^\d{4}-\d\d-\d\dT/);
    assert.equal((await contactOf(kept.contact_id)).email_suppression, null);
  });

  test('the owner setting a status says so; setting it back to Subscribed clears it; the fields are read-only', async () => {
    const made = await api().post(`/v3/users/${app.owner.id}/contacts`, { email: 'owner-set@example.com' });
    assert.equal(made.status, 201, made.raw);
    assert.equal(made.body.email_suppression, null);
    const set = await api().put(`/v3/contacts/${made.body.id}`, { status: 'Inactive - Invalid Email Address' });
    assert.equal(set.body.email_suppression.reason, 'invalid_address');
    assert.equal(set.body.email_suppression.description, 'Set by the owner');
    // Sent back as read, the suppressions are ignored, as every read-only field.
    const back = await api().put(`/v3/contacts/${made.body.id}`, { ...set.body, status: 'Subscribed', phone_suppression: { reason: 'x' } });
    assert.equal(back.status, 200, back.raw);
    assert.equal(back.body.email_suppression, null);
    assert.equal(back.body.phone_suppression, null);
  });

  test('a permanent voicemail outcome suppresses the number: the next drop skips it, saying why, until it is lifted', async () => {
    const first = await sendDrop(app, 'Sandbox', [{ phone: '(727) 555-0101' }, { phone: '(727) 555-0102' }]);
    const done = await waitForDrop(app, first.id, 'the Sandbox outcomes', (d) => d.reporting.delivered + d.reporting.failed === 2);
    assert.equal(done.reporting.delivered, 2);
    const listed = (await api().get(`/v3/voicemail_drops/${first.id}/deliveries`)).body.data;
    const landline = listed.find((d: { address: string }) => d.address === '7275550101');
    const at = app.clock.now();
    await recordDeliveryEvents(
      app.t.database.db,
      [
        {
          source: 'carrier-lookup',
          eventId: `landline-${landline.id}`,
          deliveryId: landline.id,
          type: 'failed',
          occurredAt: at,
          outcome: {
            classification: 'landline',
            permanent: true,
            code: 'Landline Removed',
            description: 'Landline Removed',
            suppress: true,
          },
        },
      ],
      at,
    );
    const suppressed = await contactOf(landline.contact_id);
    assert.equal(suppressed.status, 'Subscribed', 'the email side is untouched');
    assert.equal(suppressed.phone_suppression.reason, 'landline');
    assert.equal(suppressed.phone_suppression.delivery_id, landline.id);

    const second = await api().post(`/v3/users/${app.owner.id}/voicemail_drops`, {
      provider: 'Sandbox',
      media_id: first.media.id,
      callback_number: '(727) 232-9117',
      name: 'Second listing',
      recipients: [
        { group: 'Contacts', value: landline.contact_id },
        { group: 'Contacts', value: listed.find((d: { address: string }) => d.address === '7275550102').contact_id },
      ],
      status: 'Scheduled',
      send_type: 'Now',
    });
    assert.equal(second.status, 201, second.raw);
    const sent = await waitForDrop(app, second.body.id, 'the second drop', (d) => d.reporting.delivered === 1);
    assert.equal(sent.reporting.sent, 1, 'the suppressed number was not handed over');
    const skipped = (await api().get(`/v3/voicemail_drops/${second.body.id}/deliveries?state=skipped`)).body.data;
    assert.equal(skipped.length, 1);
    assert.match(skipped[0].last_error, /^skipped: the phone number is suppressed \(landline since \d{4}-/);
    assert.equal(skipped[0].outcome.classification, 'suppressed');
    assert.equal(skipped[0].outcome.code, 'landline');

    const lifted = await api().post(`/v3/users/${app.owner.id}/suppressions/lift`, { channel: 'phone', reasons: ['landline'] });
    assert.deepEqual(lifted.body, { lifted: 1 });
    assert.equal((await contactOf(landline.contact_id)).phone_suppression, null);
  });

  test('lifting email suppressions: by reason and time, never unsubscribes or complaints; bad bodies are 400s', async () => {
    const owner = app.owner;
    const make = async (email: string, status: string) => {
      const made = await api().post(`/v3/users/${owner.id}/contacts`, { email, status });
      assert.equal(made.status, 201, made.raw);
      return made.body.id as number;
    };
    const hard = await make('dead@example.com', 'Inactive - Hard Bounce');
    const soft = await make('full@example.com', 'Inactive - Repeated Soft Bounce');
    const gone = await make('gone@example.com', 'Unsubscribed');
    const complained = await make('angry@example.com', 'Inactive - Spam Complaint');

    const refused = await api().post(`/v3/users/${owner.id}/suppressions/lift`, { channel: 'email', reasons: ['unsubscribed'] });
    assertProblem(refused, 400, 'validation');
    assert.match(refused.body.errors.reasons[0], /person's own word/);
    assertProblem(await api().post(`/v3/users/${owner.id}/suppressions/lift`, { channel: 'sms' }), 400, 'validation');
    assertProblem(await api().post(`/v3/users/${owner.id}/suppressions/lift`, { channel: 'email', since: 'yesterday' }), 400, 'validation');
    assertProblem(await api().post(`/v3/users/${owner.id}/suppressions/lift`, { channel: 'email', nope: 1 }), 400, 'validation');

    // A time range that holds none of them lifts nothing.
    const future = new Date(app.clock.now().getTime() + 3_600_000).toISOString();
    assert.deepEqual((await api().post(`/v3/users/${owner.id}/suppressions/lift`, { channel: 'email', since: future })).body, {
      lifted: 0,
    });
    const lift = await api().post(`/v3/users/${owner.id}/suppressions/lift`, {
      channel: 'email',
      contact_ids: [hard, soft, gone, complained],
    });
    assert.deepEqual(lift.body, { lifted: 2 });
    assert.equal((await contactOf(hard)).status, 'Subscribed');
    assert.equal((await contactOf(soft)).status, 'Subscribed');
    assert.equal((await contactOf(gone)).status, 'Unsubscribed');
    assert.equal((await contactOf(complained)).status, 'Inactive - Spam Complaint');

    // Someone else's contacts are out of reach.
    const other = await asKey(app.t.app, app.t.adminKey).post('/v3/users', {
      first_name: 'O',
      last_name: 'U',
      email: 'other-owner@example.com',
    });
    assertProblem(await api().post(`/v3/users/${other.body.id}/suppressions/lift`, { channel: 'email' }), 403, 'forbidden');
  });
});
