import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TEMPLATED_MESSAGE } from '../contacts/fixtures.ts';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { assertPaging, idsOf } from '../support/paging.ts';
import { assertShape } from '../support/shapes.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

const LIBRARY = '/v3/templated_messages';
const MINIMAL = { name: 'Spring check-in', subject: 'Quick question, {{first_name}}', body: '<p>Have you thought about the market?</p>' };

describe('templated message library', () => {
  let t: TestApp;
  let admin: ReturnType<typeof asKey>;
  let user: Actor;
  let teamAdmin: Actor;
  before(async () => {
    t = await startTestApp();
    admin = asKey(t.app, t.adminKey);
    const team = await createTeam(t);
    user = await createUser(t, 'User', team);
    teamAdmin = await createUser(t, 'Team Administrator', team);
  });
  after(() => t.close());

  test('an Administrator creates, reads, updates and deletes; then 404', async () => {
    const created = await admin.post(LIBRARY, { ...MINIMAL, id: 3, created_at: 'x' });
    assert.equal(created.status, 201, created.raw);
    assertShape(created.body, TEMPLATED_MESSAGE);
    const { id } = created.body;
    assert.equal(created.headers.location, `https://hopper.test/v3/templated_messages/${id}`);
    assert.deepEqual(
      { ...created.body, created_at: null, updated_at: null },
      {
        id,
        ...MINIMAL,
        description: null,
        greeting_with_first_name: 'Hi {{first_name}},',
        greeting_without_first_name: 'Hi,',
        closing: null,
        ps_line: null,
        created_at: null,
        updated_at: null,
        deleted_at: null,
      },
    );
    assert.deepEqual((await admin.get(`${LIBRARY}/${id}`)).body, created.body);

    const changes = {
      description: 'Spring',
      closing: 'Talk soon,',
      ps_line: 'Reply with any question.',
      greeting_without_first_name: 'Hello,',
    };
    const updated = await admin.put(`${LIBRARY}/${id}`, { ...created.body, ...changes });
    assert.equal(updated.status, 200, updated.raw);
    assertShape(updated.body, TEMPLATED_MESSAGE);
    assert.deepEqual({ ...updated.body, updated_at: null }, { ...created.body, ...changes, updated_at: null });
    const partial = await admin.put(`${LIBRARY}/${id}`, { closing: null });
    assert.equal(partial.body.closing, null);
    assert.equal(partial.body.description, 'Spring', 'fields not sent stay');
    assert.deepEqual((await admin.get(`${LIBRARY}/${id}`)).body, partial.body);

    assert.deepEqual((await admin.delete(`${LIBRARY}/${id}`)).body, { success: true });
    assertProblem(await admin.get(`${LIBRARY}/${id}`), 404, 'not_found');
    assertProblem(await admin.put(`${LIBRARY}/${id}`, { name: 'x' }), 404, 'not_found');
    assertProblem(await admin.delete(`${LIBRARY}/${id}`), 404, 'not_found');
  });

  test('everyone reads the library; only Administrators change it', async () => {
    const { id } = (await admin.post(LIBRARY, MINIMAL)).body;
    for (const actor of [user, teamAdmin]) {
      const client = asKey(t.app, actor.key);
      assert.equal((await client.get(LIBRARY)).status, 200);
      assert.equal((await client.get(`${LIBRARY}/${id}`)).status, 200);
      assertProblem(await client.post(LIBRARY, MINIMAL), 403, 'forbidden');
      assertProblem(await client.put(`${LIBRARY}/${id}`, { name: 'Mine now' }), 403, 'forbidden');
      assertProblem(await client.delete(`${LIBRARY}/${id}`), 403, 'forbidden');
      assertProblem(await client.get(`${LIBRARY}/987654321`), 404, 'not_found');
    }
    assertProblem(await asKey(t.app, undefined).get(LIBRARY), 401, 'unauthorized');
    assertProblem(await admin.get(`${LIBRARY}/987654321`), 404, 'not_found');
    assert.equal((await admin.get(`${LIBRARY}/${id}`)).body.name, MINIMAL.name, 'unchanged');
  });

  test('validation names each field; bodies are sanitised', async () => {
    const missing = await admin.post(LIBRARY, {});
    assertProblem(missing, 400, 'validation');
    assert.deepEqual(missing.body.errors, { name: ['is required'], subject: ['is required'], body: ['is required'] });
    const cases: [Record<string, unknown>, string][] = [
      [{ name: ' ' }, 'name'],
      [{ name: 'x'.repeat(256) }, 'name'],
      [{ subject: 'Line one\r\nBcc: victim@example.com' }, 'subject'],
      [{ subject: '  ' }, 'subject'],
      [{ subject: 'x'.repeat(999) }, 'subject'],
      [{ body: '<script>alert(1)</script>' }, 'body'],
      [{ body: 5 }, 'body'],
      [{ description: 5 }, 'description'],
      [{ greeting_with_first_name: null }, 'greeting_with_first_name'],
      [{ greeting_without_first_name: 'x'.repeat(256) }, 'greeting_without_first_name'],
      [{ closing: ['Bye'] }, 'closing'],
      [{ ps_line: {} }, 'ps_line'],
      [{ templated_message_id: 1 }, 'templated_message_id'],
    ];
    for (const [fields, field] of cases) {
      const reply = await admin.post(LIBRARY, { ...MINIMAL, ...fields });
      assertProblem(reply, 400, 'validation');
      assert.deepEqual(Object.keys(reply.body.errors), [field], reply.raw);
    }
    const cleaned = await admin.post(LIBRARY, {
      ...MINIMAL,
      body: '<table style="width:600px"><tr><td onclick="x()">Hi <a href="javascript:void(0)">you</a></td></tr></table><iframe src="https://e.test"></iframe>',
    });
    assert.equal(cleaned.status, 201, cleaned.raw);
    assert.equal(cleaned.body.body, '<table style="width:600px"><tr><td>Hi <a>you</a></td></tr></table>');
    for (const id of ['abc', '0', '1.5', '99999999999999999999']) assertProblem(await admin.get(`${LIBRARY}/${id}`), 400, 'validation');
    const sql = await admin.post(LIBRARY, { ...MINIMAL, name: "'; DROP TABLE templated_messages; --" });
    assert.equal(sql.status, 201);
    assert.equal(sql.body.name, "'; DROP TABLE templated_messages; --");
  });

  test('search: paging, each filter, OR-ed, deleted hidden, bad parameters', async () => {
    const reader = asKey(t.app, user.key);
    // The library is global: rows other tests made are part of every unfiltered page.
    const earlier = idsOf(await reader.get(`${LIBRARY}?per_page=100`));
    const made: { id: number; name: string; subject: string; description: string | null }[] = [];
    for (let i = 0; i < 19; i++) {
      const reply = await admin.post(LIBRARY, {
        name: `${i % 2 ? 'Seller' : 'Buyer'} ${i}`,
        subject: i % 3 ? `Market update ${i}` : `Open house ${i}`,
        description: i % 4 ? null : `Quarterly ${i}`,
        body: `<p>${i}</p>`,
      });
      made.push(reply.body);
    }
    const pick = (keep: (m: (typeof made)[number]) => boolean) => made.filter(keep).map((m) => m.id);
    await assertPaging(reader, LIBRARY, [...earlier, ...pick(() => true)], 7, TEMPLATED_MESSAGE);
    assert.deepEqual(
      idsOf(await reader.get(`${LIBRARY}?name=SELLER`)),
      pick((m) => m.name.startsWith('Seller')),
    );
    assert.deepEqual(
      idsOf(await reader.get(`${LIBRARY}?subject=open%20house`)),
      pick((m) => m.subject.startsWith('Open house')),
    );
    assert.deepEqual(
      idsOf(await reader.get(`${LIBRARY}?description=quarterly`)),
      pick((m) => m.description !== null),
    );
    assert.deepEqual(idsOf(await reader.get(`${LIBRARY}?id=${made[5]?.id}&id=${made[2]?.id}`)), [made[2]?.id, made[5]?.id]);
    const either = pick((m) => m.name.startsWith('Seller') || m.subject.startsWith('Open house'));
    await assertPaging(reader, `${LIBRARY}?name=seller&subject=open%20house`, either, 4, TEMPLATED_MESSAGE);
    await admin.delete(`${LIBRARY}/${made[0]?.id}`);
    assert.deepEqual(idsOf(await reader.get(`${LIBRARY}?id=${made[0]?.id}`)), []);
    assert.equal((await reader.get(LIBRARY)).body.meta.total, earlier.length + 18);
    for (const query of ['body=x', 'user_id=1', 'greeting_with_first_name=Hi', 'id=x', 'name=', 'page=0', 'per_page=101']) {
      assertProblem(await reader.get(`${LIBRARY}?${query}`), 400, 'validation');
    }
  });
});
