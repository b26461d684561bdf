import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { asKey, type Reply } from '../support/client.ts';
import { type Actor, assertProblem, createUser } from '../support/factories.ts';
import { startTestApp, type TestApp, usingPostgres } from '../support/test-app.ts';
import { createContact } from './fixtures.ts';

/**
 * One live contact per owner and email address, in any letter case, kept by the database (the
 * unique index of migration 0021): concurrent writes of one address — creates, updates, imports —
 * leave one contact with it, and every loser gets a 409 naming the winner (or, for an import, updates it).
 */
describe('one live contact per email address', () => {
  let t: TestApp;
  let owner: Actor;
  let client: ReturnType<typeof asKey>;
  before(async () => {
    t = await startTestApp();
    owner = await createUser(t, 'User');
    client = asKey(t.app, owner.key);
  });
  after(() => t.close());

  const create = (fields: Record<string, unknown>) => client.post(`/v3/users/${owner.id}/contacts`, fields);

  /** `n` (up to 32) spellings of one address: its first five letters in upper case by the bits of 0…n-1. */
  function casings(address: string, n: number): string[] {
    const letters = [...address].flatMap((c, i) => (/[a-z]/.test(c) ? [i] : [])).slice(0, 5);
    return Array.from({ length: n }, (_, k) =>
      [...address].map((c, i) => (letters.includes(i) && (k >> letters.indexOf(i)) & 1 ? c.toUpperCase() : c)).join(''),
    );
  }

  /** The owner's live contacts with this address in any case, straight from the table. */
  async function holders(email: string): Promise<number[]> {
    const rows = await t.database.db
      .selectFrom('contacts')
      .select('id')
      .where('user_id', '=', owner.id)
      .where('deleted_at', 'is', null)
      .where(sql<boolean>`lower(email) = lower(${email})`)
      .orderBy('id')
      .execute();
    return rows.map((row) => Number(row.id));
  }

  /** A 409 `conflict` whose detail and `errors.email` name contact `id`. */
  function assertNames(reply: Reply, id: number): void {
    assertProblem(reply, 409, 'conflict');
    assert.match(reply.body.detail, new RegExp(`^Contact ${id} already has the email address `), reply.raw);
    assert.deepEqual(reply.body.errors, { email: [`is already the email address of contact ${id}`] });
  }

  for (const tagged of [false, true]) {
    test(`20 concurrent creates of one address in different letter cases${tagged ? ', with tags' : ''}: one 201, nineteen 409s naming it`, async () => {
      const address = tagged ? 'tagged.racer@example.test' : 'racer@example.test';
      const spellings = casings(address, 20);
      assert.equal(new Set(spellings).size, 20);
      const replies = await Promise.all(
        spellings.map((email, i) => create({ first_name: `Racer ${i}`, email, ...(tagged ? { tags: ['Racers', `Racer ${i}`] } : {}) })),
      );
      const won = replies.filter((reply) => reply.status === 201);
      assert.equal(won.length, 1, replies.map((reply) => reply.status).join(' '));
      const winner = won[0]!.body;
      for (const reply of replies) if (reply !== won[0]) assertNames(reply, winner.id);
      const listed = await client.get(`/v3/users/${owner.id}/contacts?email=${encodeURIComponent(address)}`);
      assert.deepEqual(
        listed.body.data.map((contact: { id: number }) => contact.id),
        [winner.id],
      );
      assert.equal(listed.body.meta.total, 1);
      assert.deepEqual(await holders(address), [winner.id]);
      if (tagged) {
        // The losers' transactions left nothing behind: no link, and only the winner's own tag is new.
        const tags = (await client.get(`/v3/users/${owner.id}/tags?name=Racer&per_page=100`)).body.data;
        assert.deepEqual(tags.filter((tag: { contacts_count: number }) => tag.contacts_count > 0).length, 2, JSON.stringify(tags));
      }
    });
  }

  test('a create and an update racing to one address: one wins, the other is a 409 naming it', async () => {
    const outcomes = new Set<string>();
    for (let round = 0; round < 8; round++) {
      const address = `swap-${round}@example.test`;
      const other = await createContact(client, owner.id, { first_name: 'Other' });
      const [created, updated] = await Promise.all([
        create({ first_name: 'New', email: address, ...(round % 2 ? { tags: ['Swap'] } : {}) }),
        client.put(`/v3/contacts/${other.id}`, { email: address.toUpperCase(), ...(round % 4 > 1 ? { tags: ['Swap'] } : {}) }),
      ]);
      if (created.status === 201) {
        outcomes.add('create');
        assertNames(updated, created.body.id);
        assert.equal((await client.get(`/v3/contacts/${other.id}`)).body.email, other.email, 'the loser is unchanged');
        assert.deepEqual(await holders(address), [created.body.id]);
      } else {
        outcomes.add('update');
        assert.equal(updated.status, 200, updated.raw);
        assert.equal(updated.body.email, address.toUpperCase());
        assertNames(created, other.id);
        assert.deepEqual(await holders(address), [other.id]);
      }
    }
    assert.ok(outcomes.size > 0);
  });

  test('concurrent imports and creates of the same addresses leave one contact each, and never a 500', async () => {
    const addresses = Array.from({ length: 6 }, (_, i) => `bulk-race-${i}@example.test`);
    const file = (name: string, upper: boolean) =>
      `email,first_name\n${addresses.map((a) => `${upper ? a.toUpperCase() : a},${name}`).join('\n')}\n`;
    const imports = [file('First', false), file('Second', true)].map((text) =>
      client.post(`/v3/users/${owner.id}/contacts/import`, text, { 'content-type': 'text/csv' }),
    );
    const creates = addresses.flatMap((email) => [create({ email }), create({ email: email.toUpperCase(), tags: ['Bulk race'] })]);
    const [first, second, ...created] = await Promise.all([...imports, ...creates]);
    for (const reply of [first!, second!]) {
      assert.equal(reply.status, 200, reply.raw);
      assert.equal(reply.body.created + reply.body.updated, addresses.length, reply.raw);
      assert.deepEqual(reply.body.refused, []);
    }
    for (const reply of created) {
      if (reply.status !== 201) assertProblem(reply, 409, 'conflict');
    }
    const made = created.filter((reply) => reply.status === 201).length + first!.body.created + second!.body.created;
    assert.equal(made, addresses.length, 'each address created once');
    for (const address of addresses) {
      const ids = await holders(address);
      assert.equal(ids.length, 1, address);
      for (const reply of created)
        if (reply.status === 409 && reply.body.detail.toLowerCase().includes(address)) assertNames(reply, ids[0]!);
    }
  });

  test('the database itself refuses a second live contact with an address, in any case', async () => {
    const first = await createContact(client, owner.id, { email: 'Only.One@example.test' });
    const insert = (email: string | null, phone: string | null = null) =>
      sql`INSERT INTO contacts (user_id, email, phone) VALUES (${owner.id}, ${email}, ${phone})`.execute(t.database.db);
    await assert.rejects(insert('only.one@EXAMPLE.test'), { code: '23505', constraint: 'contacts_owner_email_key' });
    // Contacts without an email, another owner's contacts and deleted ones are not counted.
    await insert(null, '7272329117');
    await insert(null, '7272329117');
    const stranger = await createUser(t, 'User');
    await sql`INSERT INTO contacts (user_id, email) VALUES (${stranger.id}, 'only.one@example.test')`.execute(t.database.db);
    assert.equal((await client.delete(`/v3/contacts/${first.id}`)).status, 200);
    const again = await create({ email: 'ONLY.ONE@example.test' });
    assert.equal(again.status, 201, again.raw);
    // Giving a contact the address of another is refused naming it; re-casing one's own is not.
    const other = await createContact(client, owner.id);
    assertNames(await client.put(`/v3/contacts/${other.id}`, { email: 'only.one@example.test', tags: ['x'] }), again.body.id);
    const recased = await client.put(`/v3/contacts/${again.body.id}`, { email: 'only.one@example.test' });
    assert.equal(recased.status, 200, recased.raw);
  });

  /**
   * Runs `race` while another transaction holds an uncommitted contact with `email`, waits until
   * `race` waits on that transaction (or is done without waiting), then ends it.
   */
  async function againstUncommitted<T>(
    email: string,
    end: 'COMMIT' | 'ROLLBACK',
    race: () => Promise<T>,
  ): Promise<{ id: number; result: T }> {
    const holder = new pg.Client({ connectionString: t.config.databaseUrl, options: `-c search_path=${t.config.databaseSchema}` });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      const inserted = await holder.query('INSERT INTO contacts (user_id, email) VALUES ($1, $2) RETURNING id', [owner.id, email]);
      const xid = await holder.query(
        "SELECT transactionid::text AS xid FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'transactionid' AND granted",
      );
      let done = false;
      const racing = race().finally(() => {
        done = true;
      });
      const deadline = Date.now() + 10_000;
      for (;;) {
        const waiting = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_locks
          WHERE locktype = 'transactionid' AND NOT granted AND transactionid::text = ${xid.rows[0].xid}`.execute(t.database.db);
        if (waiting.rows[0]!.n > 0 || done || Date.now() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await holder.query(end);
      return { id: Number(inserted.rows[0].id), result: await racing };
    } finally {
      await holder.end();
    }
  }

  const interleaved = { skip: usingPostgres ? false : 'PGlite runs one transaction at a time: no write can wait on another' };

  test(
    'a create, an update or an import waiting on an uncommitted contact with the address meets it once committed',
    interleaved,
    async () => {
      const created = await againstUncommitted('held.create@example.test', 'COMMIT', () => create({ email: 'HELD.create@example.test' }));
      assertNames(created.result, created.id);

      const withTags = await againstUncommitted('held.tags@example.test', 'COMMIT', () =>
        create({ email: 'held.TAGS@example.test', tags: ['Held'] }),
      );
      assertNames(withTags.result, withTags.id);

      const other = await createContact(client, owner.id);
      const updated = await againstUncommitted('held.update@example.test', 'COMMIT', () =>
        client.put(`/v3/contacts/${other.id}`, { email: 'Held.Update@example.test' }),
      );
      assertNames(updated.result, updated.id);

      const imported = await againstUncommitted('held.import@example.test', 'COMMIT', () =>
        client.post(
          `/v3/users/${owner.id}/contacts/import`,
          'email,first_name\nHELD.IMPORT@example.test,Imported\nheld.fresh@example.test,Fresh\n',
          {
            'content-type': 'text/csv',
          },
        ),
      );
      assert.equal(imported.result.status, 200, imported.result.raw);
      const counts = imported.result.body;
      assert.deepEqual(
        { created: counts.created, updated: counts.updated, refused: counts.refused },
        { created: 1, updated: 1, refused: [] },
      );
      assert.equal((await client.get(`/v3/contacts/${imported.id}`)).body.first_name, 'Imported', 'the import updated the contact it met');

      for (const email of ['held.create', 'held.tags', 'held.update', 'held.import', 'held.fresh']) {
        assert.equal((await holders(`${email}@example.test`)).length, 1, email);
      }
    },
  );

  test('a create waiting on an uncommitted contact with the address is made once that rolls back', interleaved, async () => {
    const { id, result } = await againstUncommitted('rolled.back@example.test', 'ROLLBACK', () =>
      create({ email: 'Rolled.Back@example.test' }),
    );
    assert.equal(result.status, 201, result.raw);
    assert.notEqual(result.body.id, id);
    assert.deepEqual(await holders('rolled.back@example.test'), [result.body.id]);
  });
});
