import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

/** POST /v3/users/{id}/contacts/import: CSV or JSON lines, matched by email, refused rows by line. */
describe('contact import', () => {
  let t: TestApp;
  let owner: Actor;
  let stranger: Actor;
  const as = (actor: Actor) => asKey(t.app, actor.key);
  const url = (actor: Actor, query = '') => `/v3/users/${actor.id}/contacts/import${query}`;
  const csv = (actor: Actor, text: string, query = '') => as(actor).post(url(actor, query), text, { 'content-type': 'text/csv' });
  const contacts = async (actor: Actor) =>
    (await as(actor).get(`/v3/users/${actor.id}/contacts?per_page=100`)).body.data as {
      email: string | null;
      first_name: string | null;
      phone: string | null;
      tags: string[];
    }[];

  before(async () => {
    t = await startTestApp();
    const team = await createTeam(t);
    owner = await createUser(t, 'User', team);
    stranger = await createUser(t, 'User', await createTeam(t));
  });
  after(() => t.close());

  test('creates, then updates by email in any case; a second run creates nothing; tags by name are added', async () => {
    const file =
      'Email,First_Name,phone,tags\nann@example.com,Ann,,Buyers;VIP\nbob@example.com,Bob,(727) 232-9117,Buyers\n,Phone Only,727-232-9118,\n';
    const first = await csv(owner, file, '?tag=Spring');
    assert.equal(first.status, 200, first.raw);
    assert.deepEqual({ ...first.body, file: undefined }, { created: 3, updated: 0, refused: [], file: undefined });

    const again = await csv(owner, file.replace('ann@example.com,Ann', 'ANN@Example.COM,Annie'));
    assert.deepEqual({ ...again.body, file: undefined }, { created: 0, updated: 3, refused: [], file: undefined });
    const all = await contacts(owner);
    assert.equal(all.length, 3);
    const ann = all.find((c) => c.email === 'ann@example.com');
    assert.equal(ann?.first_name, 'Annie', 'the matched contact is updated, its email kept');
    assert.deepEqual(ann?.tags, ['Buyers', 'Spring', 'VIP']);
    const tags = (await as(owner).get(`/v3/users/${owner.id}/tags`)).body.data.map((tag: { name: string }) => tag.name).sort();
    assert.deepEqual(tags, ['Buyers', 'Spring', 'VIP'], 'each tag made once');
  });

  test('duplicates inside one file: the first row counts, later ones are refused by line', async () => {
    const reply = await csv(stranger, 'email,first_name\ndup@example.com,One\nother@example.com,Other\nDUP@example.com,Two\n');
    assert.equal(reply.status, 200);
    assert.equal(reply.body.created, 2);
    assert.deepEqual(reply.body.refused, [{ line: 4, errors: { email: ['is already on line 2; a file names each contact once'] } }]);
    assert.equal((await contacts(stranger)).find((c) => c.email === 'dup@example.com')?.first_name, 'One');
  });

  test('bad rows are refused with their line and reasons, good ones imported; a NUL refuses its row', async () => {
    const file = [
      'email,phone,status,time_zone',
      'good@example.com,,,',
      'not-an-email,,,',
      ',,,',
      'nul\u0000@example.com,,,',
      'tz@example.com,,,Mars/Olympus',
      'status@example.com,,Happy,',
      '"multi',
      'line@example.com",,,',
      'short@example.com',
      'long@example.com,,,,extra',
    ].join('\n');
    const reply = await csv(owner, file);
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.body.created, 2, 'good@ and short@ (missing trailing cells are empty)');
    const refused = Object.fromEntries(reply.body.refused.map((r: { line: number; errors: object }) => [r.line, Object.keys(r.errors)]));
    assert.deepEqual(refused, {
      3: ['email'],
      4: ['email', 'phone'],
      5: ['row'],
      6: ['time_zone'],
      7: ['status'],
      8: ['email'],
      11: ['row'],
    });
  });

  test('unknown columns are ignored and listed; repeated ones refuse the whole file before anything is written', async () => {
    const before = (await contacts(owner)).length;
    const unknown = await csv(owner, 'email,favourite_colour\nx@example.com,blue\n');
    assert.equal(unknown.status, 200, unknown.raw);
    assert.deepEqual(unknown.body.file.ignored_columns, ['favourite_colour']);
    assert.deepEqual(unknown.body.file.columns, { email: 'email' });
    assertProblem(await csv(owner, 'email,Email\nx@example.com,y@example.com\n'), 400, 'validation');
    assertProblem(await csv(owner, ''), 400, 'bad_request');
    assertProblem(await csv(owner, 'email\n"unterminated\n'), 400, 'bad_request');
    assert.equal((await contacts(owner)).length, before + 1);
  });

  test('tags are separated by `;` only, as documented: a comma is part of a tag', async () => {
    const reply = await csv(stranger, 'email,tags\ncomma@example.com,"Buyers, 2026;VIP"\n');
    assert.equal(reply.status, 200, reply.raw);
    const comma = (await contacts(stranger)).find((c) => c.email === 'comma@example.com');
    assert.deepEqual(comma?.tags.toSorted(), ['Buyers, 2026', 'VIP']);
  });

  test('JSON lines: one body a line, unknown fields and non-objects refused by line', async () => {
    const lines = [
      '{"email":"jl@example.com","tags":["Lines"]}',
      '',
      '{"email":"jl2@example.com","bogus":1}',
      '[1,2]',
      'not json',
      '{"email":5}',
    ];
    const reply = await as(owner).post(url(owner), lines.join('\n'), { 'content-type': 'application/x-ndjson' });
    assert.equal(reply.status, 200, reply.raw);
    assert.equal(reply.body.created, 1);
    assert.deepEqual(
      reply.body.refused.map((r: { line: number }) => r.line),
      [3, 4, 5, 6],
    );
    assert.deepEqual(reply.body.refused[0].errors, { bogus: ['is not a known field'] });
  });

  test('limits and media types: 21 MB is 413, 50,001 rows is 413, JSON is 415; nothing is written', async () => {
    const before = (await contacts(owner)).length;
    const big = `email,first_name\n${`big@example.com,${'x'.repeat(200)}\n`.repeat(Math.ceil((21 * 1024 * 1024) / 217))}`;
    assertProblem(await csv(owner, big), 413, 'payload_too_large');
    const many = `email\n${Array.from({ length: 50_001 }, (_, i) => `m${i}@example.com`).join('\n')}`;
    assertProblem(await csv(owner, many), 413, 'payload_too_large');
    assertProblem(await as(owner).post(url(owner), { email: 'j@example.com' }), 415, 'unsupported_media_type');
    assertProblem(await as(owner).post(url(owner), 'email\nx@example.com', { 'content-type': 'text/plain' }), 415);
    assert.equal((await contacts(owner)).length, before);
  });

  test("another user's import, bad ids and bad tags are refused", async () => {
    assertProblem(await as(stranger).post(url(owner), 'email\na@example.com', { 'content-type': 'text/csv' }), 403);
    assertProblem(await as(owner).post('/v3/users/abc/contacts/import', 'email\n', { 'content-type': 'text/csv' }), 400, 'validation');
    assertProblem(await as(owner).post('/v3/users/999999/contacts/import', 'email\n', { 'content-type': 'text/csv' }), 403);
    assertProblem(await csv(owner, 'email\na@example.com', `?tag=${'x'.repeat(300)}`), 400, 'validation');
    assertProblem(await asKey(t.app, undefined).post(url(owner), 'email\n', { 'content-type': 'text/csv' }), 401);
  });
});
