import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  type Client,
  createOwnContact,
  createSignature,
  createTag,
  createTemplate,
  EMAILS,
  TEMPLATED_EMAIL,
  ZERO_REPORTING,
} from '../messages/fixtures.ts';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { assertShape } from '../support/shapes.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** The specification's templated email example, field for field. */
const EXAMPLE = {
  subject: 'Quick question, {{first_name}}',
  description: 'Spring check-in',
  body: '<p>Have you thought about the market this spring?</p>',
  closing: 'Talk soon,',
  ps_line: 'Reply to this email with any question.',
};
const EXAMPLE_TEXT =
  'Hi,\n\nHave you thought about the market this spring?\n\nTalk soon,\nJane Agent\n\nP.S. Reply to this email with any question.';

/** The templated email resource: its shape, its round trip, templates, text, sanitising and validation. */
describe('templated emails', () => {
  let t: TestApp;
  let owner: Actor;
  let other: Actor;
  let client: Client;
  let url: string;
  let valid: Record<string, unknown>;
  let signatureId: number;
  before(async () => {
    t = await startTestApp();
    owner = await createUser(t, 'User', await createTeam(t));
    other = await createUser(t, 'User', await createTeam(t));
    client = asKey(t.app, owner.key);
    url = `/v3/users/${owner.id}/templated_emails`;
    valid = await EMAILS.validBody(t, owner);
    signatureId = (await createSignature(t, owner, '<p>Jane Agent</p>')).id;
  });
  after(() => t.close());

  async function refused(fields: Record<string, unknown>, names: string[], target = url, method: 'POST' | 'PUT' = 'POST') {
    const body = Object.fromEntries(Object.entries({ ...(method === 'POST' ? valid : {}), ...fields }).filter(([, v]) => v !== undefined));
    const reply = await client.send(method, target, body);
    assertProblem(reply, 400, 'validation');
    assert.deepEqual(Object.keys(reply.body.errors).sort(), [...names].sort(), `${JSON.stringify(fields).slice(0, 200)}: ${reply.raw}`);
    return reply;
  }

  test('create → read → update → delete → 404, in the shape of the specification, with its text', async () => {
    const tag = await createTag(t, owner, 'Sphere');
    const created = await client.post(url, {
      ...EXAMPLE,
      signature_id: signatureId,
      recipients: [{ group: 'Tags', value: tag.id }],
      exclusions: [],
      // Read-only fields are ignored.
      id: 5,
      text: 'mine',
      source: 'Web',
      reporting: null,
      sending_at: '2000-01-01T00:00:00Z',
    });
    assert.equal(created.status, 201, created.raw);
    assertShape(created.body, TEMPLATED_EMAIL);
    const { id } = created.body;
    assert.equal(created.headers.location, `https://hopper.test/v3/templated_emails/${id}`);
    assert.deepEqual(
      { ...created.body, created_at: undefined, updated_at: undefined },
      {
        id,
        templated_message_id: null,
        ...EXAMPLE,
        greeting_with_first_name: 'Hi {{first_name}},',
        greeting_without_first_name: 'Hi,',
        text: EXAMPLE_TEXT,
        signature_id: signatureId,
        status: 'Saved',
        send_type: 'Now',
        send_at: null,
        sending_at: null,
        sent_at: null,
        recipients: [{ group: 'Tags', label: 'Sphere', value: tag.id }],
        exclusions: null,
        source: 'API',
        reporting: ZERO_REPORTING,
        external_id: null,
        metadata: {},
        created_at: undefined,
        updated_at: undefined,
        deleted_at: null,
      },
    );
    assert.deepEqual((await client.get(`/v3/templated_emails/${id}`)).body, created.body);

    const updated = await client.put(`/v3/templated_emails/${id}`, { closing: 'Cheers,', greeting_without_first_name: 'Hello,' });
    assert.equal(updated.status, 200, updated.raw);
    assertShape(updated.body, TEMPLATED_EMAIL);
    assert.deepEqual(
      { ...updated.body, updated_at: undefined },
      {
        ...created.body,
        closing: 'Cheers,',
        greeting_without_first_name: 'Hello,',
        text: EXAMPLE_TEXT.replace('Hi,', 'Hello,').replace('Talk soon,', 'Cheers,'),
        updated_at: undefined,
      },
    );
    const unsigned = await client.put(`/v3/templated_emails/${id}`, { signature_id: null, ps_line: '' });
    assert.equal(unsigned.body.text, 'Hello,\n\nHave you thought about the market this spring?\n\nCheers,');
    assert.deepEqual((await client.get(`/v3/templated_emails/${id}`)).body, unsigned.body);

    assert.deepEqual((await client.delete(`/v3/templated_emails/${id}`)).body, { success: true });
    assertProblem(await client.get(`/v3/templated_emails/${id}`), 404, 'not_found');
    assertProblem(await client.put(`/v3/templated_emails/${id}`, { subject: 'x' }), 404, 'not_found');
    assertProblem(await client.delete(`/v3/templated_emails/${id}`), 404, 'not_found');
  });

  test('PUT back exactly what a GET returned: 200 and nothing changes; exclusions are kept, never shown', async () => {
    const tag = await createTag(t, owner, 'Past clients');
    const created = await client.post(url, {
      ...EXAMPLE,
      signature_id: signatureId,
      status: 'Scheduled',
      send_type: 'Future',
      send_at: '2099-03-02T10:00:00+01:00',
      exclusions: [{ group: 'Tags', value: tag.id }],
    });
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.send_at, '2099-03-02T09:00:00Z');
    assert.equal(created.body.exclusions, null);
    const stored = async () =>
      (await t.database.db.selectFrom('templated_emails').select('exclusions').where('id', '=', created.body.id).executeTakeFirstOrThrow())
        .exclusions;
    assert.deepEqual(await stored(), [{ group: 'Tags', label: 'Past clients', value: tag.id }]);

    const read = (await client.get(`/v3/templated_emails/${created.body.id}`)).body;
    const again = await client.put(`/v3/templated_emails/${created.body.id}`, read);
    assert.equal(again.status, 200, again.raw);
    assert.deepEqual(again.body, read);
    assert.deepEqual(await stored(), [{ group: 'Tags', label: 'Past clients', value: tag.id }], 'exclusions: null leaves them');
    assert.equal((await client.put(`/v3/templated_emails/${created.body.id}`, { exclusions: [] })).status, 200);
    assert.deepEqual(await stored(), []);
  });

  test('fields left out are copied from the library template', async () => {
    const template = await createTemplate(t, { greeting_with_first_name: 'Hey {{first_name}}!' });
    const copied = await client.post(url, { templated_message_id: template.id, signature_id: signatureId });
    assert.equal(copied.status, 201, copied.raw);
    assert.deepEqual(
      { ...copied.body, id: 0, created_at: '', updated_at: '' },
      {
        ...(await client.post(url, { ...EXAMPLE, signature_id: signatureId })).body,
        id: 0,
        templated_message_id: template.id,
        greeting_with_first_name: 'Hey {{first_name}}!',
        created_at: '',
        updated_at: '',
      },
    );
    const mixed = await client.post(url, { templated_message_id: template.id, subject: 'Mine', closing: '' });
    assert.equal(mixed.status, 201, mixed.raw);
    assert.deepEqual([mixed.body.subject, mixed.body.closing, mixed.body.body], ['Mine', '', EXAMPLE.body]);
    assert.equal(mixed.body.text, 'Hi,\n\nHave you thought about the market this spring?\n\nP.S. Reply to this email with any question.');

    const bare = await createTemplate(t, { description: null, closing: null, ps_line: null });
    const fromBare = await client.post(url, { templated_message_id: bare.id });
    assert.equal(fromBare.status, 201, fromBare.raw);
    assert.deepEqual([fromBare.body.description, fromBare.body.closing, fromBare.body.ps_line], ['', '', '']);
    assert.deepEqual([fromBare.body.greeting_with_first_name, fromBare.body.greeting_without_first_name], ['Hi {{first_name}},', 'Hi,']);

    // A later update does not copy the template again.
    const changed = await client.put(`/v3/templated_emails/${mixed.body.id}`, { templated_message_id: bare.id });
    assert.equal(changed.status, 200, changed.raw);
    assert.deepEqual([changed.body.templated_message_id, changed.body.subject], [bare.id, 'Mine']);

    assert.equal((await asKey(t.app, t.adminKey).delete(`/v3/templated_messages/${bare.id}`)).status, 200);
    assert.equal((await client.get(`/v3/templated_emails/${fromBare.body.id}`)).body.templated_message_id, bare.id, 'copies stay');
    await refused({ subject: undefined, body: undefined, templated_message_id: bare.id }, ['templated_message_id', 'subject', 'body']);
    await refused({ templated_message_id: 987_654_321 }, ['templated_message_id']);
  });

  test('subject and body are required unless a template supplies them', async () => {
    const empty = await refused({ subject: undefined, body: undefined }, ['subject', 'body']);
    assert.match(empty.body.errors.subject[0], /required/);
    await refused({ subject: undefined }, ['subject']);
    await refused({ body: undefined }, ['body']);
    await refused({ subject: undefined, templated_message_id: null }, ['subject']);
  });

  test('a hostile body comes back clean and its text has no tags', async () => {
    const hostile =
      '<p onclick="steal()">Hello <b>there</b></p><script>alert(1)</script><img src="x" onerror="alert(1)">' +
      '<a href="javascript:alert(1)">click</a><iframe src="https://evil.test"></iframe>' +
      '<form action="https://evil.test"><input name="card"></form><a href="https://example.com/listing">listing</a>';
    const reply = await client.post(url, { ...valid, body: hostile });
    assert.equal(reply.status, 201, reply.raw);
    const { body, text } = reply.body;
    for (const gone of ['<script', 'alert(1)</', 'onclick', 'onerror', 'javascript:', '<iframe', '<form', '<input']) {
      assert.ok(!body.toLowerCase().includes(gone), `${gone} removed: ${body}`);
    }
    assert.ok(body.includes('<b>there</b>') && body.includes('href="https://example.com/listing"'), body);
    assert.doesNotMatch(text, /<[a-z/!]/i);
    assert.match(text, /Hello there/);
    assert.match(text, /listing \[https:\/\/example\.com\/listing\]/);
    await refused({ body: '<script>alert(1)</script><iframe src="x"></iframe>' }, ['body']);
    await refused({ body: '   ' }, ['body']);
  });

  test('references: signature, recipients and exclusions of the same owner', async () => {
    const theirSignature = await createSignature(t, other);
    const deletedSignature = await createSignature(t, owner);
    assert.equal((await client.delete(`/v3/signatures/${deletedSignature.id}`)).status, 200);
    for (const signature_id of [theirSignature.id, deletedSignature.id, 987_654_321, 0, '1'])
      await refused({ signature_id }, ['signature_id']);
    const tag = await createTag(t, owner, 'Leads');
    const contact = await createOwnContact(t, owner, { first_name: null, last_name: null, email: 'lead@example.com' });
    const theirTag = await createTag(t, other, 'Other leads');
    const made = await client.post(url, {
      ...valid,
      recipients: [{ group: 'Contacts', value: contact.id }],
      exclusions: [{ group: 'Tags', value: tag.id }],
    });
    assert.equal(made.status, 201, made.raw);
    assert.deepEqual(made.body.recipients, [{ group: 'Contacts', label: 'lead@example.com', value: contact.id }]);
    await refused({ recipients: [{ group: 'Tags', value: theirTag.id }] }, ['recipients.0.value']);
    await refused(
      {
        exclusions: [
          { group: 'Tags', value: tag.id },
          { group: 'Tags', value: theirTag.id },
        ],
      },
      ['exclusions.1.value'],
    );
    await refused({ exclusions: [{ group: 'People', value: 1 }] }, ['exclusions.0.group']);
    await refused({ signature_id: theirSignature.id }, ['signature_id'], `/v3/templated_emails/${made.body.id}`, 'PUT');
  });

  test('lengths, one-line subjects, unknown fields', async () => {
    const long = await client.post(url, {
      subject: 's'.repeat(998),
      body: `<p>${'b'.repeat(256 * 1024 - 7)}</p>`,
      greeting_with_first_name: 'g'.repeat(255),
      greeting_without_first_name: 'g'.repeat(255),
    });
    assert.equal(long.status, 201, long.raw.slice(0, 300));
    await refused({ subject: 's'.repeat(999) }, ['subject']);
    await refused({ body: 'b'.repeat(256 * 1024 + 1) }, ['body']);
    await refused({ greeting_with_first_name: 'g'.repeat(256) }, ['greeting_with_first_name']);
    await refused({ greeting_without_first_name: 'g'.repeat(256) }, ['greeting_without_first_name']);
    for (const subject of ['', '   ', 'Hello\r\nBcc: victim@example.com', 'Line\nbreak']) await refused({ subject }, ['subject']);
    const unknown = await refused({ name: 'x', colour: 'red' }, ['name', 'colour']);
    assert.deepEqual(unknown.body.errors.colour, ['is not a known field']);
  });

  test('merge tags are kept as written; source is API', async () => {
    const reply = await client.post(url, {
      subject: '{{first_name}}, {{last_name}} and {{full_name}}',
      body: '<p>Dear {{first_name}} &amp; family</p>',
      ps_line: 'See you, {{first_name}}',
    });
    assert.equal(reply.status, 201, reply.raw);
    assert.equal(reply.body.subject, '{{first_name}}, {{last_name}} and {{full_name}}');
    assert.equal(reply.body.body, '<p>Dear {{first_name}} &amp; family</p>');
    assert.equal(reply.body.text, 'Hi,\n\nDear {{first_name}} & family\n\nP.S. See you, {{first_name}}');
    assert.equal(reply.body.source, 'API');
  });
});
