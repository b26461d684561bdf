import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { SendingApp } from '../sending/support/sending-app.ts';
import { readEmail } from '../sending/support/sending-app.ts';
import { CORPORA, type Sample, samples } from '../support/bounce-corpora.ts';
import { AGENT, client, type Sent, sendTo, startInboundApp } from './support.ts';

/**
 * The real bounce, complaint, auto-reply and success messages of the bounce corpora
 * (test/support/bounce-corpora.ts: the 280 of ../shared/bounces/, written by Postfix, Exim,
 * sendmail, qmail, Exchange, Gmail, Yahoo, Amazon SES, DragonFly, ARF and JMRP feedback loops…, and
 * the 15 of test/fixtures/bounces/), each delivered unchanged over real SMTP to the bounce (VERP)
 * address of its own delivery of one templated email. What Hopper made of each — the contact's
 * status, the delivery's state and outcome, the events, the replies kept — is compared with
 * Sisimai's verdict in its corpus's expected.json: the confusion table is printed, and the issue's
 * thresholds are asserted on every sample, the tuned-on and the held-out parts alike.
 *
 * The envelope sender is not in a file: each comes from the null sender, as RFC 5321 4.5.5 has a
 * server send its bounces (a mailbox records it as `<>`, or as sendmail's `MAILER-DAEMON@host`,
 * which is how most of the files' Return-Path say it; the anonymised set rewrote others), and the
 * one sender a report at a bounce address counts from unconfirmed (issue 36, finding 6). Amazon
 * SES's forwarded bounces and complaints come from SES's own domain, a known feedback loop: they
 * are sent from the address their Return-Path names, and count because SPF confirms it (the zone
 * below stands for amazonses.com's record). test/security/inbound-reports.test.ts sends the same
 * files from other senders and to other addresses, where they count for nothing.
 */
const SES = /@([\w-]+\.)*amazonses\.com$/i;
const ZONE = {
  'amazonses.com': { TXT: ['v=spf1 ip4:127.0.0.1 -all'] },
  'us-west-2.amazonses.com': { TXT: ['v=spf1 ip4:127.0.0.1 -all'] },
};
const SAMPLES = samples();
const VERDICTS = ['hard', 'soft', 'hard-or-soft', 'complaint', 'auto-reply', 'none'];
const OUTCOMES = ['hard', 'soft', 'complaint', 'unsubscribed', 'reply', 'auto-reply', 'none'];

describe('real bounce messages at the VERP addresses of one templated email', () => {
  let s: SendingApp & { port: number };
  let sent: Sent;
  before(async () => {
    s = await startInboundApp({}, ZONE);
    sent = await sendTo(s, SAMPLES.length);
  });
  after(() => s.close());

  test('every message of every corpus has its verdict', () => {
    for (const { name, dir } of CORPORA) {
      const files = readdirSync(dir).filter((f) => /\.(eml|txt)$/.test(f));
      assert.deepEqual(
        files.sort(),
        SAMPLES.filter((x) => x.corpus === name).map((x) => x.file),
      );
    }
  });

  test('no bounce, complaint or auto-reply is counted as a reply or forwarded; hard ≥ 95 %, soft made hard ≤ 5 %, every complaint, outcome accepted ≥ 95 %', async () => {
    const mta = client(s.port, true);
    try {
      const results = await Promise.all(
        SAMPLES.map((sample, i) => {
          const raw = readFileSync(sample.path);
          // The envelope sender: the null sender, but for SES's own (above).
          const returnPath = /^Return-Path:\s*<([^>]*)>/im.exec(raw.toString('latin1').split(/\r?\n\r?\n/)[0] ?? '')?.[1] ?? '';
          const to = (sent.to[i] as Sent['to'][number]).returnPath;
          return mta.sendMail({ envelope: { from: SES.test(returnPath) ? returnPath : '', to: [to] }, raw });
        }),
      );
      assert.ok(results.every((r) => /^250/.test(r.response)));
    } finally {
      mta.close();
    }

    const db = s.t.database.db;
    const contactIds = sent.to.map((t) => t.contactId);
    const contacts = new Map(
      (await db.selectFrom('contacts').select(['id', 'status', 'email_suppression']).where('id', 'in', contactIds).execute()).map((c) => [
        Number(c.id),
        c,
      ]),
    );
    const deliveries = await db
      .selectFrom('deliveries')
      .select(['id', 'contact_id', 'state', 'outcome'])
      .where('message_kind', '=', 'templated_email')
      .where('message_id', '=', sent.emailId)
      .execute();
    const deliveryOf = new Map(deliveries.map((d) => [Number(d.contact_id), d]));
    const events = await db
      .selectFrom('delivery_events')
      .select(['delivery_id', 'type'])
      .where(
        'delivery_id',
        'in',
        deliveries.map((d) => d.id),
      )
      .execute();
    const replies = await db.selectFrom('replies').select(['delivery_id', 'auto_reply']).where('message_id', '=', sent.emailId).execute();

    const table = new Map<string, Map<string, number>>(VERDICTS.map((v) => [v, new Map()]));
    const misses: string[] = [];
    let accepted = 0;
    SAMPLES.forEach((want, i) => {
      const file = `${want.corpus}/${want.file}`;
      const contactId = (sent.to[i] as Sent['to'][number]).contactId;
      const contact = contacts.get(contactId);
      const delivery = deliveryOf.get(contactId);
      assert.ok(contact && delivery);
      const types = new Set(events.filter((e) => Number(e.delivery_id) === Number(delivery.id)).map((e) => e.type));
      const kept = replies.filter((r) => Number(r.delivery_id) === Number(delivery.id));
      const outcome =
        contact.status === 'Inactive - Hard Bounce'
          ? 'hard'
          : contact.status === 'Inactive - Spam Complaint'
            ? 'complaint'
            : contact.status === 'Unsubscribed'
              ? 'unsubscribed'
              : types.has('reply')
                ? 'reply'
                : types.has('soft_bounce') || types.has('temporary_bounce')
                  ? 'soft'
                  : kept.some((r) => r.auto_reply)
                    ? 'auto-reply'
                    : 'none';
      // What the delivery and the contact say agrees with the outcome.
      if (outcome === 'hard') {
        assert.equal(delivery.state, 'bounced', file);
        assert.equal(delivery.outcome?.permanent, true, file);
        assert.equal(contact.email_suppression?.reason, 'hard_bounce', file);
        assert.equal(Number(contact.email_suppression?.delivery_id), Number(delivery.id), file);
      }
      if (outcome === 'soft') {
        assert.equal(contact.status, 'Subscribed', `${file}: a soft bounce leaves the contact`);
        if (types.has('soft_bounce')) {
          assert.equal(delivery.state, 'bounced', file);
          assert.equal(delivery.outcome?.permanent, false, file);
          assert.equal(delivery.outcome?.source, 'dsn', file);
          assert.ok(delivery.outcome?.classification, file);
        }
      }
      const row = table.get(want.outcome) as Map<string, number>;
      row.set(outcome, (row.get(outcome) ?? 0) + 1);
      if (want.accept.includes(outcome)) accepted++;
      else
        misses.push(`${file}: sisimai ${want.outcome} (${want.reason} ${want.dsn}), Hopper ${outcome} ${JSON.stringify(delivery.outcome)}`);
    });

    const lines = [
      `| sisimai's verdict | files | ${OUTCOMES.join(' | ')} |`,
      `|---|---|${OUTCOMES.map(() => '---').join('|')}|`,
      ...VERDICTS.map((v) => {
        const row = table.get(v) as Map<string, number>;
        const n = [...row.values()].reduce((a, b) => a + b, 0);
        return `| ${v} | ${n} | ${OUTCOMES.map((o) => row.get(o) ?? '·').join(' | ')} |`;
      }),
      `outcome accepted: ${accepted}/${SAMPLES.length}`,
      ...misses,
    ];
    console.log(lines.join('\n'));

    const email = await readEmail(s, sent.emailId);
    const sum = (m: Map<string, number> | undefined) => [...(m ?? new Map()).values()].reduce((a, b) => a + b, 0);
    assert.equal(email.reporting.reply, 0, 'no message at a VERP address is a reply');
    assert.equal(s.sink.to(AGENT).length, 0, 'nothing is forwarded to the agent');
    const hard = table.get('hard');
    const soft = table.get('soft');
    const complaint = table.get('complaint');
    assert.ok((hard?.get('hard') ?? 0) >= 0.95 * sum(hard), `hard bounces recognised: ${hard?.get('hard')}/${sum(hard)}`);
    assert.ok((soft?.get('hard') ?? 0) <= 0.05 * sum(soft), `soft bounces made hard: ${soft?.get('hard')}/${sum(soft)}`);
    // Every complaint recognised as one: an abuse report retires the contact, an opt-out unsubscribes
    // it, an auth-failure report (about the sender's SPF/DKIM, not the person) is kept and changes nothing.
    const kinds = await db
      .selectFrom('inbound_messages')
      .select(['delivery_id', 'kind'])
      .where(
        'delivery_id',
        'in',
        deliveries.map((d) => d.id),
      )
      .execute();
    const complaints = SAMPLES.flatMap((x: Sample, i) =>
      x.outcome === 'complaint' ? [deliveryOf.get((sent.to[i] as Sent['to'][number]).contactId)?.id] : [],
    );
    assert.equal(complaints.length, sum(complaint));
    for (const id of complaints) assert.equal(kinds.find((k) => Number(k.delivery_id) === Number(id))?.kind, 'complaint');
    assert.ok(accepted >= 0.95 * SAMPLES.length, `outcome accepted for ${accepted}/${SAMPLES.length}`);
    // The counters are the ledger: one bounce per bounced delivery, the hard ones, and every soft one.
    assert.equal(email.reporting.bounce, deliveries.filter((d) => d.state === 'bounced').length);
    assert.equal(
      email.reporting.hard_bounce,
      [...table.values()].reduce((n, row) => n + (row.get('hard') ?? 0), 0),
    );
    assert.equal(email.reporting.soft_bounce, events.filter((e) => e.type === 'soft_bounce' || e.type === 'temporary_bounce').length);
  });
});
