import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { simpleParser } from 'mailparser';
import type { Zone } from '../inbound/dns.ts';
import { AGENT, arf, client, dsn, INBOUND_DOMAIN, type Sent, sendTo, startInboundApp } from '../inbound/support.ts';
import type { SendingApp } from '../sending/support/sending-app.ts';
import { readEmail } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';

/**
 * Finding 6 of issue 36: a message shaped as a bounce or a spam report, sent to a contact's
 * Reply-To (r-…@) address or to postmaster@ by anyone, made the contact Hard Bounce or Spam
 * Complaint. A report now counts only from the null sender at the bounce (VERP, b-…@) address,
 * which only the receiving servers see, or — wherever it arrives — from a known feedback loop
 * whose address SPF, DKIM or DMARC confirms (INBOUND_FEEDBACK_LOOPS). Everything else is kept and
 * changes nothing.
 *
 * Finding 8 (one of four): a reply's display name `"CEO <ceo@bank.example>"` went into the
 * forward's From as it was.
 */
const CORPUS = join(import.meta.dirname, '..', '..', '..', 'shared', 'bounces');
const expected = JSON.parse(readFileSync(join(CORPUS, 'expected.json'), 'utf8')) as Record<string, { outcome: string }>;
/** The real hard bounces and complaints of ../shared/bounces/: what a forger would copy. */
const REPORTS = Object.keys(expected)
  .filter((file) => ['hard', 'complaint'].includes(expected[file]?.outcome ?? ''))
  .sort();

const ZONE: Zone = {
  // The loop this test trusts sends from its own servers (here: this machine).
  'loop.example': { TXT: ['v=spf1 ip4:127.0.0.1 -all'] },
  // A domain whose servers are elsewhere: mail from it through this machine fails SPF.
  'elsewhere.example': { TXT: ['v=spf1 ip4:192.0.2.1 -all'] },
  'attacker.example': { TXT: ['v=spf1 ip4:127.0.0.1 -all'] },
};

describe('reports that retire a contact, and who may send them', () => {
  let s: SendingApp & { port: number };
  let sent: Sent;
  let corpus: Sent['to'];
  before(async () => {
    s = await startInboundApp({ INBOUND_FEEDBACK_LOOPS: 'fbl@loop.example' }, ZONE);
    sent = await sendTo(s, 8 + REPORTS.length);
    corpus = sent.to.slice(8);
  });
  after(() => s.close());

  const reporting = async () => (await readEmail(s, sent.emailId)).reporting;
  const status = async (id: number) => (await s.api.get(`/v3/contacts/${id}`)).body.status;
  const kept = async (deliveryIds: number[]) =>
    s.t.database.db.selectFrom('inbound_messages').select(['delivery_id', 'kind']).where('delivery_id', 'in', deliveryIds).execute();
  const deliveryOf = async (contactId: number) =>
    Number(
      (
        await s.t.database.db
          .selectFrom('deliveries')
          .select('id')
          .where('contact_id', '=', contactId)
          .where('message_id', '=', sent.emailId)
          .executeTakeFirstOrThrow()
      ).id,
    );
  const id = () => `<${randomBytes(6).toString('hex')}@mx.example.net>`;
  const arfFrom = (from: string, to: string, contact: Sent['to'][number]) =>
    arf(to, { to: contact.email, ...contact }, id()).replace('From: <staff@hotmail.example>', `From: <${from}>`);

  test('a bounce or a complaint at a reply address or postmaster, from anyone (the null sender too), is kept and changes nothing', async () => {
    const target = sent.to[0]!;
    const mta = client(s.port);
    for (const from of ['', 'mailer-daemon@attacker.example']) {
      await mta.sendMail({ envelope: { from, to: target.replyTo }, raw: dsn(target.replyTo, target.email, '5.1.1', id()) });
      await mta.sendMail({ envelope: { from, to: target.replyTo }, raw: arfFrom('abuse@attacker.example', target.replyTo, target) });
      // Postmaster: the report names the delivery by the addresses it quotes.
      const postmaster = `postmaster@${INBOUND_DOMAIN}`;
      await mta.sendMail({ envelope: { from, to: postmaster }, raw: arfFrom('abuse@attacker.example', postmaster, target) });
      await mta.sendMail({
        envelope: { from, to: `abuse@${INBOUND_DOMAIN}` },
        raw: dsn(postmaster, target.email, '5.1.1', id()).replace(
          `To: ${target.email}\r\n`,
          `To: ${target.email}\r\nReturn-Path: <${target.returnPath}>\r\n`,
        ),
      });
    }
    assert.equal(await status(target.contactId), 'Subscribed');
    const counters = await reporting();
    assert.deepEqual([counters.bounce, counters.hard_bounce, counters.spamreport, counters.unsubscribe], [0, 0, 0, 0]);
    const stored = await kept([await deliveryOf(target.contactId)]);
    assert.ok(stored.some((m) => m.kind === 'bounce') && stored.some((m) => m.kind === 'complaint'), 'kept, as what they are');
  });

  test('at the bounce address a report counts from the null sender only', async () => {
    const target = sent.to[1]!;
    const mta = client(s.port);
    await mta.sendMail({
      envelope: { from: 'someone@attacker.example', to: target.returnPath },
      raw: dsn(target.returnPath, target.email, '5.1.1', id()),
    });
    await mta.sendMail({
      envelope: { from: 'someone@attacker.example', to: target.returnPath },
      raw: arfFrom('abuse@attacker.example', target.returnPath, target),
    });
    assert.equal(await status(target.contactId), 'Subscribed');
    await mta.sendMail({ envelope: { from: '', to: target.returnPath }, raw: dsn(target.returnPath, target.email, '5.1.1', id()) });
    assert.equal(await status(target.contactId), 'Inactive - Hard Bounce');
    assert.equal((await reporting()).hard_bounce, 1);
  });

  test('a known feedback loop counts wherever it reports, once SPF confirms it; its name alone does not', async () => {
    const [confirmed, forged, sibling] = [sent.to[2]!, sent.to[3]!, sent.to[4]!];
    const mta = client(s.port);
    // The loop's address, from a server its SPF does not name.
    await mta.sendMail({
      envelope: { from: 'fbl@elsewhere.example', to: forged.replyTo },
      raw: arfFrom('fbl@loop.example', forged.replyTo, forged),
    });
    // Another address of the loop's domain (the loop is one address), SPF passing.
    await mta.sendMail({
      envelope: { from: 'other@loop.example', to: sibling.replyTo },
      raw: arfFrom('other@loop.example', sibling.replyTo, sibling),
    });
    assert.equal(await status(forged.contactId), 'Subscribed');
    assert.equal(await status(sibling.contactId), 'Subscribed');
    await mta.sendMail({
      envelope: { from: 'fbl@loop.example', to: `postmaster@${INBOUND_DOMAIN}` },
      raw: arfFrom('fbl@loop.example', `postmaster@${INBOUND_DOMAIN}`, confirmed),
    });
    assert.equal(await status(confirmed.contactId), 'Inactive - Spam Complaint');
    assert.equal((await reporting()).spamreport, 1);
  });

  test(`the real hard bounces and complaints of ../shared/bounces/ (${REPORTS.length}), sent to reply addresses, retire nobody`, async () => {
    const mta = client(s.port, true);
    try {
      await Promise.all(
        REPORTS.map((file, i) => {
          const to = corpus[i]!.replyTo;
          // Half from the null sender, half from an address, as a forger may choose.
          return mta.sendMail({
            envelope: { from: i % 2 ? '' : 'mailer-daemon@attacker.example', to: [to] },
            raw: readFileSync(join(CORPUS, file)),
          });
        }),
      );
    } finally {
      mta.close();
    }
    const statuses = await s.t.database.db
      .selectFrom('contacts')
      .select('status')
      .where(
        'id',
        'in',
        corpus.map((c) => c.contactId),
      )
      .execute();
    assert.deepEqual([...new Set(statuses.map((c) => c.status))], ['Subscribed']);
    assert.equal(s.sink.to(AGENT).filter((m) => REPORTS.some((f) => m.raw.includes(f))).length, 0);
  });

  test('a display name that holds an address is not put in front of the agent', async () => {
    const target = sent.to[5]!;
    for (const [name, shown] of [
      ['CEO <ceo@bank.example>', 'CEO via Hopper'],
      ['ceo@bank.example', 'attacker@attacker.example via Hopper'],
      ['Pat \u202Eelpmaxe.knab@oec', 'Pat via Hopper'],
    ] as const) {
      const marker = `name-${randomBytes(4).toString('hex')}`;
      await client(s.port).sendMail({
        envelope: { from: 'attacker@attacker.example', to: target.replyTo },
        from: { name, address: 'attacker@attacker.example' },
        to: target.replyTo,
        subject: 'Urgent wire',
        text: `Please wire the funds (${marker}).`,
      });
      const found = await waitFor(`the forward for ${name}`, async () => s.sink.to(AGENT).find((m) => m.raw.includes(marker)));
      const mail = await simpleParser(found.raw);
      const fromName = mail.from?.value[0]?.name ?? '';
      assert.equal(fromName, shown, name);
      // Only the sender's real address may show, when nothing of the name is left.
      assert.doesNotMatch(fromName, /bank\.example|[<>\u202E]/, name);
      assert.equal(mail.replyTo?.value[0]?.address, 'attacker@attacker.example');
      assert.doesNotMatch(mail.replyTo?.value[0]?.name ?? '', /bank\.example/);
      assert.doesNotMatch((mail.text ?? '').split('\n')[0] ?? '', /bank\.example/, 'nor in the first line');
    }
  });
});
