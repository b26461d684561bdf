import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SIGNATURE } from '../contacts/fixtures.ts';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createTeam, createUser } from '../support/factories.ts';
import { assertPaging, idsOf } from '../support/paging.ts';
import { assertShape } from '../support/shapes.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

const LAYOUT =
  '<table width="100%" cellpadding="0" style="border-collapse:collapse"><tr>' +
  '<td valign="top" style="padding:4px;color:#333"><img src="https://cdn.example.com/logo.png" alt="Acme" width="80"></td>' +
  '<td><strong>Jane Agent</strong><br><a href="mailto:jane@example.com">jane@example.com</a></td></tr></table>';

describe('signatures', () => {
  let t: TestApp;
  let owner: Actor;
  let client: ReturnType<typeof asKey>;
  let url: string;
  before(async () => {
    t = await startTestApp();
    owner = await createUser(t, 'User', await createTeam(t));
    client = asKey(t.app, owner.key);
    url = `/v3/users/${owner.id}/signatures`;
  });
  after(() => t.close());

  test('create → read → update → delete → 404', async () => {
    const created = await client.post(url, { name: 'Work', body: LAYOUT, id: 7, deleted_at: null });
    assert.equal(created.status, 201, created.raw);
    assertShape(created.body, SIGNATURE);
    const { id } = created.body;
    assert.equal(created.headers.location, `https://hopper.test/v3/signatures/${id}`);
    assert.equal(created.body.name, 'Work');
    assert.equal(created.body.deleted_at, null);
    for (const kept of [
      '<table',
      'cellpadding="0"',
      'style="padding:4px;color:#333"',
      '<img src="https://cdn.example.com/logo.png"',
      'mailto:',
    ]) {
      assert.ok(created.body.body.includes(kept), `${kept} survives sanitising: ${created.body.body}`);
    }
    assert.deepEqual((await client.get(`/v3/signatures/${id}`)).body, created.body);

    const updated = await client.put(`/v3/signatures/${id}`, { ...created.body, name: 'Work (short)' });
    assert.equal(updated.status, 200, updated.raw);
    assertShape(updated.body, SIGNATURE);
    assert.equal(updated.body.name, 'Work (short)');
    assert.equal(updated.body.body, created.body.body, 'an unchanged body survives a round trip');
    const bodyOnly = await client.put(`/v3/signatures/${id}`, { body: '<p>Jane</p>' });
    assert.deepEqual([bodyOnly.body.name, bodyOnly.body.body], ['Work (short)', '<p>Jane</p>']);
    assert.deepEqual((await client.get(`/v3/signatures/${id}`)).body, bodyOnly.body);

    assert.deepEqual((await client.delete(`/v3/signatures/${id}`)).body, { success: true });
    assertProblem(await client.get(`/v3/signatures/${id}`), 404, 'not_found');
    assertProblem(await client.put(`/v3/signatures/${id}`, { name: 'x' }), 404, 'not_found');
    assertProblem(await client.delete(`/v3/signatures/${id}`), 404, 'not_found');
  });

  test('bodies are sanitised to the email allow-list', async () => {
    const hostile =
      '<p onclick="steal()" style="color:red">Hi</p><script>alert(1)</script>' +
      '<a href="javascript:alert(1)">x</a><iframe src="https://evil.test"></iframe>' +
      '<form action="https://evil.test"><input name="card"></form><img src="x" onerror="alert(1)">';
    const reply = await client.post(url, { name: 'Hostile', body: hostile });
    assert.equal(reply.status, 201, reply.raw);
    const body: string = reply.body.body;
    assert.ok(body.includes('<p style="color:red">Hi</p>'), body);
    for (const gone of ['script', 'onclick', 'javascript:', 'iframe', '<form', '<input', 'onerror']) {
      assert.ok(!body.toLowerCase().includes(gone), `${gone} removed: ${body}`);
    }
    const onlyUnsafe = await client.post(url, { name: 'Empty', body: '<script>alert(1)</script>' });
    assertProblem(onlyUnsafe, 400, 'validation');
    assert.deepEqual(Object.keys(onlyUnsafe.body.errors), ['body']);
  });

  test('validation names each field', async () => {
    const missing = await client.post(url, {});
    assertProblem(missing, 400, 'validation');
    assert.deepEqual(missing.body.errors, { name: ['is required'], body: ['is required'] });
    const cases: [Record<string, unknown>, string][] = [
      [{ name: '', body: 'x' }, 'name'],
      [{ name: '   ', body: 'x' }, 'name'],
      [{ name: 'x'.repeat(256), body: 'x' }, 'name'],
      [{ name: 5, body: 'x' }, 'name'],
      [{ name: 'n', body: '' }, 'body'],
      [{ name: 'n', body: null }, 'body'],
      [{ name: 'n', body: ['<p>x</p>'] }, 'body'],
      [{ name: 'n', body: 'x'.repeat(100_001) }, 'body'],
      [{ name: 'n', body: 'x', html: true }, 'html'],
    ];
    for (const [body, field] of cases) {
      const reply = await client.post(url, body);
      assertProblem(reply, 400, 'validation');
      assert.deepEqual(Object.keys(reply.body.errors), [field], reply.raw);
    }
    for (const id of ['abc', '0', '-5', '99999999999999999999']) {
      assertProblem(await client.get(`/v3/signatures/${id}`), 400, 'validation');
    }
    const sql = await client.post(url, { name: "'; DROP TABLE signatures; --", body: "<p>'; DELETE FROM users; --</p>" });
    assert.equal(sql.status, 201);
    assert.equal(sql.body.name, "'; DROP TABLE signatures; --");
  });

  test('search: paging, filters OR-ed, deleted hidden, bad parameters', async () => {
    const user = await createUser(t, 'User', await createTeam(t));
    const as = asKey(t.app, user.key);
    const mine = `/v3/users/${user.id}/signatures`;
    const made: { id: number; name: string }[] = [];
    for (let i = 0; i < 17; i++) {
      made.push((await as.post(mine, { name: `${i % 2 ? 'Formal' : 'Casual'} ${i}`, body: `<p>Sig ${i}</p>` })).body);
    }
    const all = made.map((s) => s.id);
    await assertPaging(as, mine, all, 6, SIGNATURE);
    assert.deepEqual(
      idsOf(await as.get(`${mine}?name=FORMAL`)),
      made.filter((s) => s.name.startsWith('Formal')).map((s) => s.id),
    );
    assert.deepEqual(idsOf(await as.get(`${mine}?id=${all[3]}&id=${all[0]}`)), [all[0], all[3]]);
    assert.deepEqual(
      idsOf(await as.get(`${mine}?name=casual&id=${all[1]}`)),
      made.filter((s) => s.name.startsWith('Casual') || s.id === all[1]).map((s) => s.id),
    );
    await as.delete(`/v3/signatures/${all[0]}`);
    assert.deepEqual(idsOf(await as.get(`${mine}?id=${all[0]}`)), []);
    assert.equal((await as.get(mine)).body.meta.total, 16);
    for (const query of ['body=x', 'user_id=1', 'id=x', 'name=', 'page=-1', 'per_page=0']) {
      assertProblem(await as.get(`${mine}?${query}`), 400, 'validation');
    }
  });
});
