import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asKey } from '../support/client.ts';
import { type Actor, assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { apiTime, type Client, createMessage, forceStatus, KINDS } from './fixtures.ts';

/** The status and schedule rules (docs/sending.md, "A message's life"), the same for voicemail drops and templated emails. */
describe('message status and schedule', () => {
  let t: TestApp;
  let owner: Actor;
  let client: Client;
  before(async () => {
    t = await startTestApp();
    owner = await createUser(t, 'User');
    client = asKey(t.app, owner.key);
  });
  after(() => t.close());

  const within = (at: string | null, from: number, what: string) => {
    assert.ok(at !== null, `${what}: send_at is set`);
    const ms = Date.parse(at);
    assert.ok(ms >= from - 1000 && ms <= Date.now() + 1000, `${what}: send_at is now, got ${at}`);
  };

  for (const kind of KINDS) {
    describe(kind.label, () => {
      const url = () => `/v3/users/${owner.id}/${kind.collection}`;
      const one = (id: number) => `/v3/${kind.collection}/${id}`;
      const create = (fields: Record<string, unknown>) => createMessage(t, kind, owner, fields);
      const post = async (fields: Record<string, unknown>) => client.post(url(), { ...(await kind.validBody(t, owner)), ...fields });
      const expect400 = async (reply: Awaited<ReturnType<Client['get']>>, field: string, pattern?: RegExp) => {
        assertProblem(reply, 400, 'validation');
        assert.deepEqual(Object.keys(reply.body.errors), [field], reply.raw);
        if (pattern) assert.match(reply.body.errors[field][0], pattern);
      };

      test('a new message is a Saved draft to send Now, with no send times', async () => {
        const draft = await create({});
        assert.deepEqual(
          [draft.status, draft.send_type, draft.send_at, draft.sending_at, draft.sent_at],
          ['Saved', 'Now', null, null, null],
        );
        const future = await create({ send_type: 'Future' });
        assert.deepEqual([future.status, future.send_type, future.send_at], ['Saved', 'Future', null]);
      });

      test('only Saved and Scheduled can be set; the error names the allowed ones', async () => {
        for (const status of ['Sending', 'Sent', 'Failed', 'Cancelled', 'Draft', 'saved', '']) {
          await expect400(await post({ status }), 'status', /Saved, Scheduled/);
        }
        const draft = await create({});
        for (const status of ['Sending', 'Sent', 'Failed', 'Cancelled'])
          await expect400(await client.put(one(draft.id), { status }), 'status');
        assert.equal((await client.get(one(draft.id))).body.status, 'Saved');
      });

      test('Scheduled + Now is due at once; Saved unschedules', async () => {
        const from = Date.now();
        const now = await create({ status: 'Scheduled' });
        assert.deepEqual([now.status, now.send_type], ['Scheduled', 'Now']);
        within(now.send_at, from, 'create');
        assert.equal(now.sending_at, null);
        const same = await client.put(one(now.id), { status: 'Scheduled', send_type: 'Now' });
        assert.equal(same.body.send_at, now.send_at, 'scheduling again keeps the time');

        const saved = await client.put(one(now.id), { status: 'Saved' });
        assert.equal(saved.status, 200, saved.raw);
        assert.deepEqual([saved.body.status, saved.body.send_at], ['Saved', null]);
        const again = await client.put(one(now.id), { status: 'Scheduled' });
        within(again.body.send_at, from, 'update');
      });

      test('Scheduled + Future needs a send_at in the future', async () => {
        await expect400(await post({ status: 'Scheduled', send_type: 'Future' }), 'send_at', /required/);
        await expect400(await post({ status: 'Scheduled', send_type: 'Future', send_at: apiTime(-60_000) }), 'send_at', /future/);
        await expect400(await post({ status: 'Scheduled', send_type: 'Future', send_at: null }), 'send_at', /required/);
        const at = apiTime(3_600_000);
        const future = await create({ status: 'Scheduled', send_type: 'Future', send_at: at });
        assert.deepEqual([future.status, future.send_type, future.send_at], ['Scheduled', 'Future', at]);

        await expect400(await client.put(one(future.id), { send_at: apiTime(-1000) }), 'send_at', /future/);
        const later = apiTime(7_200_000);
        assert.equal((await client.put(one(future.id), { send_at: later })).body.send_at, later);
        const draft = await create({ send_type: 'Future', send_at: at });
        await expect400(await client.put(one(draft.id), { status: 'Scheduled', send_at: null }), 'send_at', /required/);
        const scheduled = await client.put(one(draft.id), { status: 'Scheduled' });
        assert.deepEqual([scheduled.body.status, scheduled.body.send_at], ['Scheduled', at]);
        const toNow = await client.put(one(future.id), { send_type: 'Now' });
        assert.equal(toNow.body.send_type, 'Now');
        within(toNow.body.send_at, Date.now() - 2000, 'Future → Now is due at once');
      });

      test('Sending, Sent, Failed and Cancelled messages cannot be edited; PUT back what was read is fine', async () => {
        for (const status of ['Sending', 'Sent', 'Failed', 'Cancelled']) {
          const message = await create({ status: 'Scheduled' });
          await forceStatus(t, kind, message.id, status);
          const read = (await client.get(one(message.id))).body;
          assert.equal(read.status, status);
          await expect400(await client.put(one(message.id), { [kind.textField]: 'Changed' }), 'status', new RegExp(status));
          await expect400(await client.put(one(message.id), { status: 'Saved' }), 'status');
          await expect400(await client.put(one(message.id), { status: 'Scheduled' }), 'status');
          await expect400(await client.put(one(message.id), { send_type: 'Future', send_at: apiTime(3_600_000) }), 'status');
          const back = await client.put(one(message.id), read);
          assert.equal(back.status, 200, `${status}: ${back.raw}`);
          assert.deepEqual(back.body, read);
          assert.deepEqual((await client.get(one(message.id))).body, read, `${status}: nothing changed`);
        }
      });

      test('Sending → Cancelled stops a message; nothing else becomes Cancelled', async () => {
        const sending = await create({ status: 'Scheduled' });
        await forceStatus(t, kind, sending.id, 'Sending');
        const cancelled = await client.put(one(sending.id), { status: 'Cancelled' });
        assert.equal(cancelled.status, 200, cancelled.raw);
        assert.equal(cancelled.body.status, 'Cancelled');
        assert.equal((await client.get(one(sending.id))).body.status, 'Cancelled');
        await expect400(await client.put(one(sending.id), { status: 'Cancelled', [kind.textField]: 'x' }), 'status');
        for (const status of ['Sent', 'Failed']) {
          const done = await create({});
          await forceStatus(t, kind, done.id, status);
          await expect400(await client.put(one(done.id), { status: 'Cancelled' }), 'status');
        }
        const scheduled = await create({ status: 'Scheduled' });
        await expect400(await client.put(one(scheduled.id), { status: 'Cancelled' }), 'status', /Saved, Scheduled/);
      });

      test('delete: a Sending message must be cancelled first; Scheduled and finished ones go', async () => {
        const sending = await create({ status: 'Scheduled' });
        await forceStatus(t, kind, sending.id, 'Sending');
        await expect400(await client.delete(one(sending.id)), 'status', /Cancelled/);
        assert.equal((await client.get(one(sending.id))).status, 200, 'still there');
        assert.equal((await client.put(one(sending.id), { status: 'Cancelled' })).status, 200);
        assert.deepEqual((await client.delete(one(sending.id))).body, { success: true });

        const scheduled = await create({ status: 'Scheduled', send_type: 'Future', send_at: apiTime(3_600_000) });
        assert.deepEqual((await client.delete(one(scheduled.id))).body, { success: true });
        assertProblem(await client.get(one(scheduled.id)), 404, 'not_found');
        const deleted = await t.database.db
          .selectFrom(kind.collection)
          .select(['status', 'deleted_at'])
          .where('id', '=', scheduled.id)
          .executeTakeFirstOrThrow();
        assert.ok(deleted.deleted_at instanceof Date, 'soft-deleted');
        for (const status of ['Sent', 'Failed']) {
          const done = await create({});
          await forceStatus(t, kind, done.id, status);
          assert.equal((await client.delete(one(done.id))).status, 200, status);
        }
      });
    });
  }
});
