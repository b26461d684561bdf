import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertProblem, createTeam, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { asKey, mp3File, PNG, postForm, upload, wavFile } from './fixtures.ts';

describe('media access rules and search', () => {
  let t: TestApp;
  let teamAdmin: Awaited<ReturnType<typeof createUser>>;
  let member: Awaited<ReturnType<typeof createUser>>;
  let teammate: Awaited<ReturnType<typeof createUser>>;
  let outsider: Awaited<ReturnType<typeof createUser>>;
  before(async () => {
    t = await startTestApp();
    const team = await createTeam(t);
    teamAdmin = await createUser(t, 'Team Administrator', team);
    member = await createUser(t, 'User', team);
    teammate = await createUser(t, 'User', team);
    outsider = await createUser(t, 'User', await createTeam(t));
  });
  after(() => t.close());

  const uploadAs = (key: string, userId: number) =>
    postForm(t.app, key, `/v3/users/${userId}/media`, [{ name: 'file', filename: 'a.wav', content: wavFile(0.5) }]);

  test('create: own 201, Team Administrator for a team member 201, a teammate or outsider 403, unknown user 403/404', async () => {
    assert.equal((await uploadAs(member.key, member.id)).status, 201);
    assert.equal((await uploadAs(teamAdmin.key, member.id)).status, 201);
    assertProblem(await uploadAs(teammate.key, member.id), 403, 'forbidden');
    assertProblem(await uploadAs(outsider.key, member.id), 403, 'forbidden');
    assertProblem(await uploadAs(member.key, 999_999), 403, 'forbidden');
    assertProblem(await uploadAs(t.adminKey, 999_999), 404, 'not_found');
    assertProblem(await uploadAs(undefined as unknown as string, member.id), 401, 'unauthorized');
    const json = await asKey(t.app, outsider.key).post(`/v3/users/${member.id}/media`, { full_url: 'https://example.com/a.mp3' });
    assertProblem(json, 403, 'forbidden');
  });

  test('read, download, delete: owner and Team Administrator 200, others 403, missing 404', async () => {
    const media = await upload(t.app, member.key, member.id, 'mine.wav', wavFile(0.5));
    for (const key of [member.key, teamAdmin.key, t.adminKey]) {
      assert.equal((await asKey(t.app, key).get(`/v3/media/${media.id}`)).status, 200);
      assert.equal((await asKey(t.app, key).get(`/v3/media/${media.id}/download`)).status, 200);
    }
    for (const key of [teammate.key, outsider.key]) {
      assertProblem(await asKey(t.app, key).get(`/v3/media/${media.id}`), 403, 'forbidden');
      assertProblem(await asKey(t.app, key).get(`/v3/media/${media.id}/download`), 403, 'forbidden');
      assertProblem(await asKey(t.app, key).delete(`/v3/media/${media.id}`), 403, 'forbidden');
      assertProblem(await asKey(t.app, key).get(`/v3/users/${member.id}/media`), 403, 'forbidden');
    }
    assertProblem(await asKey(t.app, member.key).get('/v3/media/999999'), 404, 'not_found');
    assertProblem(await asKey(t.app, member.key).delete('/v3/media/999999'), 404, 'not_found');
    assert.equal((await asKey(t.app, teamAdmin.key).delete(`/v3/media/${media.id}`)).status, 200);
  });

  test('search pages in id order inside the envelope, with OR-ed filters that keep to the owner', async () => {
    const owner = await createUser(t, 'User');
    const api = asKey(t.app, owner.key);
    const ids: number[] = [];
    for (let i = 0; i < 17; i++) {
      const media = await upload(
        t.app,
        owner.key,
        owner.id,
        i % 2 ? `house-${i}.mp3` : `call-${i}.wav`,
        i % 2 ? mp3File(0.2) : wavFile(0.2),
      );
      ids.push(media.id);
    }
    const image = await upload(t.app, owner.key, owner.id, 'logo.png', PNG, [{ name: 'collection_name', value: 'images' }]);
    await upload(t.app, member.key, member.id, 'house-elsewhere.mp3', mp3File(0.2));

    const first = await api.get(`/v3/users/${owner.id}/media`);
    assert.equal(first.status, 200);
    assert.equal(first.body.meta.total, 18);
    assert.equal(first.body.meta.per_page, 15);
    assert.equal(first.body.data.length, 15);
    assert.deepEqual(
      first.body.data.map((m: { id: number }) => m.id),
      ids.slice(0, 15),
    );
    assert.equal(first.body.meta.path, `https://hopper.test/v3/users/${owner.id}/media`);

    const page2 = await api.get(`/v3/users/${owner.id}/media?mime_type=audio/mpeg&name=HOUSE&per_page=5&page=2`);
    assert.equal(page2.status, 200, page2.raw);
    // mime_type OR name: the 8 MP3s (all named house-…).
    assert.equal(page2.body.meta.total, 8);
    assert.deepEqual(
      page2.body.data.map((m: { name: string }) => m.name),
      ['house-11', 'house-13', 'house-15'],
    );
    assert.match(page2.body.links.first, /mime_type=audio%2Fmpeg/);

    const images = await api.get(`/v3/users/${owner.id}/media?collection_name=images`);
    assert.deepEqual(
      images.body.data.map((m: { id: number }) => m.id),
      [image.id],
    );
    const byIds = await api.get(`/v3/users/${owner.id}/media?id=${ids[0]}&id=${ids[3]}`);
    assert.deepEqual(
      byIds.body.data.map((m: { id: number }) => m.id),
      [ids[0], ids[3]],
    );
    const byFileName = await api.get(`/v3/users/${owner.id}/media?file_name=call-16.wav`);
    assert.equal(byFileName.body.meta.total, 1);
    const past = await api.get(`/v3/users/${owner.id}/media?page=9`);
    assert.deepEqual(past.body.data, []);
    assert.equal(past.body.meta.from, null);

    assertProblem(await api.get(`/v3/users/${owner.id}/media?colour=red`), 400, 'validation');
    assertProblem(await api.get(`/v3/users/${owner.id}/media?id=abc`), 400, 'validation');
    assertProblem(await api.get(`/v3/users/${owner.id}/media?page=0`), 400, 'validation');
    assertProblem(await api.get(`/v3/users/${owner.id}/media?per_page=101`), 400, 'validation');
  });

  test('a cancelled account in its grace period may read and delete media but not upload', async () => {
    const leaving = await createUser(t, 'User');
    const media = await upload(t.app, leaving.key, leaving.id, 'keep.wav', wavFile(0.5));
    assert.equal((await asKey(t.app, leaving.key).post(`/v3/users/${leaving.id}/cancel`)).status, 200);
    assertProblem(await uploadAs(leaving.key, leaving.id), 403, 'account_cancelled');
    assert.equal((await asKey(t.app, leaving.key).get(`/v3/media/${media.id}/download`)).status, 200);
    assert.equal((await asKey(t.app, leaving.key).delete(`/v3/media/${media.id}`)).status, 200);
  });
});
