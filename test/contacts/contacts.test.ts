import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey, type Reply } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { assertShape } from '../support/shapes.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { CONTACT, createContact } from './fixtures.ts';

describe('contacts', () => {
  let t: TestApp;
  let owner: Actor;
  let client: ReturnType<typeof asKey>;
  before(async () => {
    t = await startTestApp();
    owner = await createUser(t, 'User', await createTeam(t));
    client = asKey(t.app, owner.key);
  });
  after(() => t.close());

  /** A 400 validation problem whose `errors` name exactly these fields. */
  function assertInvalid(reply: Reply, fields: string[], what = ''): void {
    assertProblem(reply, 400, 'validation');
    assert.deepEqual(Object.keys(reply.body.errors).sort(), [...fields].sort(), `${what} ${reply.raw}`);
  }

  test('create → read → update → delete → 404', async () => {
    const created = await client.post(`/v3/users/${owner.id}/contacts`, {
      first_name: 'Jane',
      last_name: 'Doe',
      email: 'jane@example.com',
      phone: '(727) 232-9117',
      time_zone: 'America/New_York',
      tags: ['Sphere', 'buyers'],
    });
    assert.equal(created.status, 201, created.raw);
    assertShape(created.body, CONTACT);
    const { id } = created.body;
    assert.equal(created.headers.location, `https://hopper.test/v3/contacts/${id}`);
    assert.deepEqual(
      { ...created.body, created_at: undefined, updated_at: undefined },
      {
        id,
        user_id: owner.id,
        first_name: 'Jane',
        last_name: 'Doe',
        full_name: 'Jane Doe',
        email: 'jane@example.com',
        phone: '7272329117',
        time_zone: 'America/New_York',
        status: 'Subscribed',
        email_suppression: null,
        phone_suppression: null,
        tags: ['buyers', 'Sphere'],
        external_id: null,
        created_at: undefined,
        updated_at: undefined,
        deleted_at: null,
      },
    );

    const read = await client.get(`/v3/contacts/${id}`);
    assert.equal(read.status, 200);
    assert.deepEqual(read.body, created.body);

    // Partial update; read-only fields in the body are ignored.
    const updated = await client.put(`/v3/contacts/${id}`, {
      status: 'Unsubscribed',
      last_name: null,
      tags: ['Sphere'],
      id: 999,
      user_id: 12345,
      full_name: 'Nobody',
      created_at: 'whenever',
      deleted_at: 'now',
    });
    assert.equal(updated.status, 200, updated.raw);
    assertShape(updated.body, CONTACT);
    assert.equal(updated.body.id, id);
    assert.equal(updated.body.user_id, owner.id);
    assert.equal(updated.body.status, 'Unsubscribed');
    assert.equal(updated.body.last_name, null);
    assert.equal(updated.body.full_name, 'Jane');
    assert.equal(updated.body.email, 'jane@example.com');
    assert.equal(updated.body.phone, '7272329117');
    assert.deepEqual(updated.body.tags, ['Sphere']);
    assert.equal(updated.body.created_at, created.body.created_at);
    assert.deepEqual((await client.get(`/v3/contacts/${id}`)).body, updated.body);

    // What was read can be sent back as it is.
    const putBack = await client.put(`/v3/contacts/${id}`, updated.body);
    assert.equal(putBack.status, 200, putBack.raw);
    assert.deepEqual({ ...putBack.body, updated_at: null }, { ...updated.body, updated_at: null });

    const deleted = await client.delete(`/v3/contacts/${id}`);
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.body, { success: true });
    assertProblem(await client.get(`/v3/contacts/${id}`), 404, 'not_found');
    assertProblem(await client.put(`/v3/contacts/${id}`, { first_name: 'Again' }), 404, 'not_found');
    assertProblem(await client.delete(`/v3/contacts/${id}`), 404, 'not_found');
    assert.deepEqual((await client.get(`/v3/users/${owner.id}/contacts?id=${id}`)).body.data, []);
  });

  test('a phone or an email is enough; everything else has a default', async () => {
    const byPhone = await createContact(client, owner.id, { first_name: undefined, email: undefined, phone: '+1 416 967 1111' });
    assertShape(byPhone, CONTACT);
    assert.deepEqual(
      [
        byPhone.first_name,
        byPhone.last_name,
        byPhone.full_name,
        byPhone.email,
        byPhone.phone,
        byPhone.time_zone,
        byPhone.status,
        byPhone.tags,
      ],
      [null, null, null, null, '4169671111', null, 'Subscribed', []],
    );
    const byEmail = await createContact(client, owner.id, { first_name: '  ', last_name: ' Smith ' });
    assert.equal(byEmail.phone, null);
    assert.equal(byEmail.first_name, null, 'blank names are no names');
    assert.equal(byEmail.full_name, 'Smith');
  });

  test('phones are normalised to 10 NANP digits; anything else is refused naming phone', async () => {
    const accepted = ['(727) 232-9117', '+1 727 232 9117', '1-727-232-9117', '727.232.9117', '7272329117', '+1 (727) 232-9117'];
    for (const phone of accepted) {
      assert.equal((await createContact(client, owner.id, { phone })).phone, '7272329117', phone);
    }
    const refused = [
      '123-456-7890',
      '555-555-5555',
      '+44 20 7946 0958',
      'call 727 232 9117',
      '727-232-911',
      '1 1 727 232 9117',
      '',
      '+7272329117',
    ];
    for (const phone of refused) {
      const reply = await client.post(`/v3/users/${owner.id}/contacts`, { email: 'p@example.com', phone });
      assertInvalid(reply, ['phone'], phone);
      assert.match(reply.body.errors.phone[0], /10-digit North American phone number/);
    }
  });

  test('each validation rule names its field', async () => {
    const url = `/v3/users/${owner.id}/contacts`;
    assertInvalid(await client.post(url, {}), ['email', 'phone']);
    assertInvalid(await client.post(url, { first_name: 'No way to reach' }), ['email', 'phone']);
    for (const email of ['not-an-email', 'a@', `${'x'.repeat(250)}@example.com`]) {
      assertInvalid(await client.post(url, { email }), ['email'], email);
    }
    for (const time_zone of ['Mars/Olympus_Mons', 'America/New York', '', 'EST5EDT; DROP']) {
      assertInvalid(await client.post(url, { email: 'tz@example.com', time_zone }), ['time_zone'], time_zone);
    }
    assert.equal((await createContact(client, owner.id, { time_zone: 'UTC' })).time_zone, 'UTC');
    const status = await client.post(url, { email: 's@example.com', status: 'Active' });
    assertInvalid(status, ['status']);
    assert.match(status.body.errors.status[0], /Subscribed, Unsubscribed, Inactive - Hard Bounce/);
    for (const status of [
      'Subscribed',
      'Unsubscribed',
      'Inactive - Hard Bounce',
      'Inactive - Spam Complaint',
      'Inactive - Invalid Email Address',
    ]) {
      assert.equal((await createContact(client, owner.id, { status })).status, status);
    }
    assertInvalid(await client.post(url, { email: 'n@example.com', first_name: 'x'.repeat(256) }), ['first_name']);
    assertInvalid(await client.post(url, { email: 'n@example.com', last_name: 'x'.repeat(256) }), ['last_name']);
    assertInvalid(await client.post(url, { email: 't@example.com', tags: ['ok', '   '] }), ['tags.1']);
    assertInvalid(await client.post(url, { email: 't@example.com', tags: ['x'.repeat(256)] }), ['tags.0']);
    assertInvalid(await client.post(url, { email: 't@example.com', tags: Array.from({ length: 101 }, (_, i) => `t${i}`) }), ['tags']);
    const unknown = await client.post(url, { email: 'u@example.com', nickname: 'Bob', tag_ids: [1] });
    assertInvalid(unknown, ['nickname', 'tag_ids']);
    assert.deepEqual(unknown.body.errors.nickname, ['is not a known field']);

    // On update the stored values count: clearing the only way to reach a contact is refused.
    const emailOnly = await createContact(client, owner.id);
    assertInvalid(await client.put(`/v3/contacts/${emailOnly.id}`, { email: null }), ['email', 'phone']);
    assertInvalid(await client.put(`/v3/contacts/${emailOnly.id}`, { phone: 'nope' }), ['phone']);
    const swapped = await client.put(`/v3/contacts/${emailOnly.id}`, { email: null, phone: '727-232-9117' });
    assert.equal(swapped.status, 200, swapped.raw);
    assert.deepEqual([swapped.body.email, swapped.body.phone], [null, '7272329117']);
  });

  test('wrong types are 400s naming the field', async () => {
    const contact = await createContact(client, owner.id);
    const wrong: Record<string, unknown[]> = {
      first_name: [5, [], {}, true],
      last_name: [5, ['x']],
      email: [5, true, ['a@b.c']],
      phone: [7272329117, {}, ['7272329117']],
      time_zone: [7, {}],
      status: [1, null, ['Subscribed']],
      tags: ['Sphere', [5], [null], [{}], null],
    };
    for (const [field, values] of Object.entries(wrong)) {
      for (const value of values) {
        for (const reply of [
          await client.post(`/v3/users/${owner.id}/contacts`, { email: 'w@example.com', [field]: value }),
          await client.put(`/v3/contacts/${contact.id}`, { [field]: value }),
        ]) {
          assertProblem(reply, 400, 'validation');
          assert.ok(
            Object.keys(reply.body.errors).some((k) => k.startsWith(field)),
            `${field}=${JSON.stringify(value)}: ${reply.raw}`,
          );
        }
      }
    }
  });

  test('bodies that are not objects, and ids that are not ids, are 400s', async () => {
    for (const raw of ['[]', '"contact"', '42', 'null', '{"email": ']) {
      assertProblem(await client.post(`/v3/users/${owner.id}/contacts`, raw, { 'content-type': 'application/json' }), 400);
    }
    assertProblem(await client.post(`/v3/users/${owner.id}/contacts`), 400);
    assertProblem(await client.post(`/v3/users/${owner.id}/contacts`, 'email=a@b.c', { 'content-type': 'text/plain' }), 415);
    for (const id of ['abc', '1.5', '0', '-1', '9007199254740992', '99999999999999999999999', "1'--"]) {
      for (const reply of [
        await client.get(`/v3/contacts/${id}`),
        await client.put(`/v3/contacts/${id}`, { first_name: 'x' }),
        await client.delete(`/v3/contacts/${id}`),
        await client.get(`/v3/users/${id}/contacts`),
        await client.post(`/v3/users/${id}/contacts`, { email: 'i@example.com' }),
      ]) {
        assertProblem(reply, 400, 'validation');
      }
    }
    assertProblem(await client.get('/v3/contacts/9007199254740991'), 404, 'not_found');
  });

  test('SQL and HTML in strings are stored as text, never run', async () => {
    const hostile = {
      first_name: "Robert'); DROP TABLE contacts;--",
      last_name: '<script>alert(1)</script>',
      email: "o'brien+x@example.com",
      tags: ["'; DELETE FROM tags; --", '<b onmouseover=alert(1)>vip</b>', '%_\\'],
    };
    const contact = await createContact(client, owner.id, hostile);
    assert.equal(contact.first_name, hostile.first_name);
    assert.equal(contact.last_name, hostile.last_name);
    assert.equal(contact.email, hostile.email);
    assert.deepEqual([...contact.tags].sort(), [...hostile.tags].sort());
    const found = await client.get(`/v3/users/${owner.id}/contacts?first_name=${encodeURIComponent("'); DROP TABLE")}`);
    assert.deepEqual(
      found.body.data.map((c: { id: number }) => c.id),
      [contact.id],
    );
    const injected = await client.get(`/v3/users/${owner.id}/contacts?last_name=${encodeURIComponent("' OR 1=1 --")}`);
    assert.equal(injected.status, 200);
    assert.equal(injected.body.meta.total, 0);
    assert.equal((await client.get(`/v3/contacts/${contact.id}`)).status, 200, 'the table is still there');
  });
});
