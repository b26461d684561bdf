import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { assertProblem } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/**
 * Every message a sentence about what the client sent (issue 26): the field or parameter named as
 * sent, not as Ajv's path; the body itself when it is not an object; ids too long to be ids; each
 * field in the detail when several fail; one status (409) for every duplicate.
 */
describe('error messages read as sentences about what was sent', () => {
  let t: TestApp;
  let admin: ReturnType<typeof asKey>;

  before(async () => {
    t = await startTestApp();
    admin = asKey(t.app, t.adminKey);
  });
  after(() => t.close());

  test('a query parameter given once is named as itself, not as item 0 of a list', async () => {
    for (const [url, name] of [
      [`/v3/users/${t.adminId}/voicemail_drops?status=Gone`, 'status'],
      [`/v3/users/${t.adminId}/templated_emails?status=Gone`, 'status'],
    ] as const) {
      const reply = await admin.get(url);
      assertProblem(reply, 400, 'validation');
      assert.deepEqual(Object.keys(reply.body.errors), [name], url);
      assert.match(reply.body.detail, new RegExp(`^The ${name} field must be one of: `), url);
    }
    const twice = await admin.get(`/v3/users/${t.adminId}/voicemail_drops?status=Saved&status=Gone`);
    assertProblem(twice, 400, 'validation');
    assert.deepEqual(Object.keys(twice.body.errors), ['status']);
  });

  test('an item of a body list is named as an item', async () => {
    const reply = await admin.post(`/v3/users/${t.adminId}/webhooks`, {
      url: 'https://hooks.example.com/x',
      events: ['contact.created', 'nope'],
    });
    assertProblem(reply, 400, 'validation');
    assert.deepEqual(Object.keys(reply.body.errors), ['events.1']);
    assert.match(reply.body.detail, /^Item 2 of events must be one of: /);
    const nested = await admin.post(`/v3/users/${t.adminId}/templated_emails`, {
      subject: 'S',
      body: '<p>B</p>',
      recipients: [{ group: 'Tags', value: 'x' }],
    });
    assertProblem(nested, 400, 'validation');
    assert.equal(nested.body.detail, 'The value field of item 1 of recipients must be an integer.');
  });

  test('a body that is not an object is told so, not "the body field"', async () => {
    for (const [body, kind] of [
      ['[]', 'an array'],
      ['"text"', 'a string'],
      ['5', 'a number'],
    ] as const) {
      const reply = await admin.post('/v3/teams', body, { 'content-type': 'application/json' });
      assertProblem(reply, 400, 'bad_request');
      assert.equal(reply.body.detail, `The request body must be a JSON object, not ${kind}.`);
    }
  });

  test('an id of 20 digits is too long to be an id; letters are not an id', async () => {
    const huge = await admin.get('/v3/users/99999999999999999999');
    assertProblem(huge, 400, 'validation');
    assert.equal(huge.body.detail, 'The id field has more digits than any id (at most 16).');
    const letters = await admin.get('/v3/voicemail_drops/abc');
    assert.equal(letters.body.detail, 'The id field must be an id: digits only, such as 42.');
  });

  test('several fields: the detail names each', async () => {
    const reply = await admin.post('/v3/users', { first_name: 5, email: 'nope' });
    assertProblem(reply, 400, 'validation');
    assert.match(reply.body.detail, /^3 fields are invalid\. /);
    for (const field of ['first_name', 'last_name', 'email']) assert.match(reply.body.detail, new RegExp(`The ${field} field `));
  });

  test('one status for one kind of conflict: a duplicate user email, tag name and contact email are all 409', async () => {
    const email = 'same@messages.example';
    assert.equal((await admin.post('/v3/users', { first_name: 'A', last_name: 'B', email })).status, 201);
    const user = await admin.post('/v3/users', { first_name: 'C', last_name: 'D', email: email.toUpperCase() });
    assertProblem(user, 409, 'conflict');
    assert.equal(user.body.detail, `Another user already has the email address ${email.toUpperCase()}.`);
    assert.deepEqual(user.body.errors, { email: ['is already the email address of another user'] });

    assert.equal((await admin.post(`/v3/users/${t.adminId}/contacts`, { email })).status, 201);
    const contact = await admin.post(`/v3/users/${t.adminId}/contacts`, { email });
    assertProblem(contact, 409, 'conflict');
    assert.deepEqual(Object.keys(contact.body.errors), ['email']);

    assert.equal((await admin.post(`/v3/users/${t.adminId}/tags`, { name: 'Buyers' })).status, 201);
    const tag = await admin.post(`/v3/users/${t.adminId}/tags`, { name: 'buyers' });
    assertProblem(tag, 409, 'conflict');
    assert.deepEqual(tag.body.errors, { name: ['is already the name of another tag'] });
  });
});
