import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { assertProblem, createTeam, TIMESTAMP } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

const USER_FIELDS = [
  'cancelled_at',
  'created_at',
  'deleted_at',
  'email',
  'first_name',
  'full_name',
  'id',
  'last_name',
  'phone',
  'postal_address',
  'roles',
  'sender_email',
  'sender_name',
  'sending_paused',
  'status',
  'team_id',
  'time_zone',
  'updated_at',
];

describe('users', () => {
  let t: TestApp;
  let admin: ReturnType<typeof asKey>;
  let teamId: number;
  before(async () => {
    t = await startTestApp();
    admin = asKey(t.app, t.adminKey);
    teamId = await createTeam(t, 'Search team');
    for (let i = 1; i <= 17; i++) {
      const reply = await admin.post('/v3/users', {
        first_name: i % 2 ? 'Odd' : 'Even',
        last_name: `Number${i}`,
        email: `member${i}@search.example`,
        team_id: i <= 5 ? teamId : null,
      });
      assert.equal(reply.status, 201, reply.raw);
    }
  });
  after(() => t.close());

  test('create → read → update → cancel round trip with the full field set', async () => {
    const created = await admin.post('/v3/users', {
      first_name: 'Jane',
      last_name: 'Agent',
      email: 'Jane.Agent@Example.com',
      phone: '+1 (727) 232-9117',
      time_zone: 'America/New_York',
      roles: ['Team Administrator'],
      team_id: teamId,
      id: 12345,
      created_at: 'ignored',
    });
    assert.equal(created.status, 201, created.raw);
    assert.deepEqual(Object.keys(created.body).sort(), USER_FIELDS);
    assert.equal(created.headers.location, `https://hopper.test/v3/users/${created.body.id}`);
    assert.notEqual(created.body.id, 12345, 'read-only fields are ignored');
    assert.equal(created.body.full_name, 'Jane Agent');
    assert.deepEqual(created.body.roles, ['Team Administrator']);
    assert.equal(created.body.status, 'Active');
    assert.match(created.body.created_at, TIMESTAMP);
    assert.equal(typeof created.body.id, 'number');

    const read = await admin.get(`/v3/users/${created.body.id}`);
    assert.deepEqual(read.body, created.body, 'create returns what a read returns');

    const updated = await admin.put(`/v3/users/${created.body.id}`, { ...read.body, last_name: 'Broker' });
    assert.equal(updated.status, 200, updated.raw);
    assert.equal(updated.body.last_name, 'Broker');
    assert.equal(updated.body.full_name, 'Jane Broker');
    assert.equal(updated.body.email, 'Jane.Agent@Example.com', 'partial update keeps other fields');

    const cleared = await admin.put(`/v3/users/${created.body.id}`, { phone: null, time_zone: null });
    assert.equal(cleared.body.phone, null);
    assert.equal(cleared.body.time_zone, null);

    const cancelled = await admin.post(`/v3/users/${created.body.id}/cancel`);
    assert.equal(cancelled.body.status, 'Cancelled');
    assert.match(cancelled.body.cancelled_at, TIMESTAMP);
    const again = await admin.post(`/v3/users/${created.body.id}/cancel`);
    assert.equal(again.body.cancelled_at, cancelled.body.cancelled_at, 'cancelling twice keeps the first date');
  });

  test('emails are unique whatever their case', async () => {
    const first = await admin.post('/v3/users', { first_name: 'A', last_name: 'B', email: 'dup@example.com' });
    assert.equal(first.status, 201);
    const second = await admin.post('/v3/users', { first_name: 'C', last_name: 'D', email: 'DUP@example.com' });
    assertProblem(second, 409, 'conflict');
    assert.equal(second.body.detail, 'Another user already has the email address DUP@example.com.');
    assert.deepEqual(second.body.errors, { email: ['is already the email address of another user'] });
    const other = await admin.post('/v3/users', { first_name: 'E', last_name: 'F', email: 'other@example.com' });
    const clash = await admin.put(`/v3/users/${other.body.id}`, { email: 'Dup@Example.com' });
    assertProblem(clash, 409, 'conflict');
    assert.deepEqual(clash.body.errors, { email: ['is already the email address of another user'] });
    const same = await admin.put(`/v3/users/${first.body.id}`, { email: 'DUP@example.com' });
    assert.equal(same.status, 200, 'a user may change the case of their own address');
  });

  test('references are checked: unknown team, unknown time zone', async () => {
    const reply = await admin.post('/v3/users', {
      first_name: 'A',
      last_name: 'B',
      email: 'ref@example.com',
      team_id: 999_999,
      time_zone: 'Europe/Atlantis',
    });
    assertProblem(reply, 400, 'validation');
    assert.deepEqual(reply.body.errors, {
      time_zone: ['must be an IANA time zone such as America/New_York'],
      team_id: ['does not name an existing team'],
    });
  });

  test('search pages: 15 by default, page 2 and 3, per_page, envelope and links', async () => {
    const page1 = await admin.get('/v3/users?email=search.example');
    assert.equal(page1.body.data.length, 15);
    assert.deepEqual(page1.body.meta, {
      current_page: 1,
      from: 1,
      last_page: 2,
      path: 'https://hopper.test/v3/users',
      per_page: 15,
      to: 15,
      total: 17,
    });
    assert.equal(page1.body.links.first, 'https://hopper.test/v3/users?email=search.example&page=1');
    assert.equal(page1.body.links.next, 'https://hopper.test/v3/users?email=search.example&page=2');
    assert.equal(page1.body.links.prev, null);
    const ids = page1.body.data.map((u: { id: number }) => u.id);
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
      'ordered by id',
    );

    const page2 = await admin.get('/v3/users?email=search.example&page=2');
    assert.equal(page2.body.data.length, 2);
    assert.equal(page2.body.meta.from, 16);
    assert.equal(page2.body.meta.to, 17);
    assert.equal(page2.body.links.next, null);
    assert.equal(page2.body.links.prev, 'https://hopper.test/v3/users?email=search.example&page=1');

    const page3 = await admin.get('/v3/users?email=search.example&page=3');
    assert.deepEqual(page3.body.data, []);
    assert.equal(page3.body.meta.from, null);
    assert.equal(page3.body.meta.to, null);
    assert.equal(page3.body.meta.current_page, 3);

    const small = await admin.get('/v3/users?email=search.example&per_page=4&page=5');
    assert.equal(small.body.data.length, 1);
    assert.equal(small.body.meta.last_page, 5);
    assert.equal(small.body.links.last, 'https://hopper.test/v3/users?email=search.example&per_page=4&page=5');
  });

  test('filters: exact ids and enums, substrings, OR across and within filters', async () => {
    const byTeam = await admin.get(`/v3/users?team_id=${teamId}`);
    assert.ok(byTeam.body.data.every((u: { team_id: number }) => u.team_id === teamId));
    const odd = await admin.get('/v3/users?first_name=odd&per_page=100');
    assert.equal(odd.body.meta.total, 9, 'case-insensitive substring');
    const either = await admin.get('/v3/users?last_name=Number1&last_name=Number2&per_page=100');
    // Number1, Number10–17 and Number2 match one of the two substrings.
    assert.equal(either.body.meta.total, 10);
    const across = await admin.get(`/v3/users?team_id=${teamId}&last_name=Number17&per_page=100`);
    assert.equal(across.body.meta.total, byTeam.body.meta.total + 1, 'the team members OR Number17 (not in the team)');
    const status = await admin.get('/v3/users?status=Active&email=search.example');
    assert.ok(status.body.meta.total >= 17, 'status OR email');
  });
});
