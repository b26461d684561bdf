import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import type { SendingApp } from '../sending/support/sending-app.ts';
import { readEmail } from '../sending/support/sending-app.ts';
import { waitFor } from '../sending/support/wait.ts';
import type { Zone } from './dns.ts';
import { AGENT, client, INBOUND_DOMAIN, type Sent, sendTo, startInboundApp } from './support.ts';

/**
 * Forwards a person can rely on, over real SMTP both ways (nodemailer as the contact's MTA, the
 * receiver, the relay a loopback SMTP server advertising SMTPUTF8), with SPF, DKIM and DMARC
 * checked by mailauth against a DNS zone the test publishes (test/inbound/dns.ts):
 *
 * - the forward carries the reply's attachments, In-Reply-To/References to the email answered,
 *   and names that email by its subject;
 * - replies from IDN, UTF-8 and quoted-local-part addresses reach the agent;
 * - `RCPT TO:<postmaster>` is accepted;
 * - forged mail (DMARC fails) is stored and held, never forwarded nor counted; a reply whose
 *   DMARC passes is forwarded with the verdict in Authentication-Results;
 * - forwards per reply address are limited (INBOUND_FORWARDS_PER_DAY).
 */
const dkimKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
const dkimRecord = `v=DKIM1; k=rsa; p=${dkimKey.publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;
const ZONE: Zone = {
  // A bank that publishes a strict policy: only its own servers send for it.
  'wellsfargo.com': { TXT: ['v=spf1 ip4:159.45.0.0/16 -all'] },
  '_dmarc.wellsfargo.com': { TXT: ['v=DMARC1; p=reject; rua=mailto:dmarc@wellsfargo.com'] },
  // A contact's domain with SPF for this machine, a DKIM key and a DMARC policy.
  'client.example': { TXT: ['v=spf1 ip4:127.0.0.1 -all'] },
  '_dmarc.client.example': { TXT: ['v=DMARC1; p=quarantine'] },
  'sel1._domainkey.client.example': { TXT: [dkimRecord] },
};

describe('forwards of replies', () => {
  let s: SendingApp & { port: number };
  let sent: Sent;
  let subjects: Map<string, { messageId: string; subject: string }>;
  before(async () => {
    s = await startInboundApp({ INBOUND_MAX_BYTES: String(2 * 1024 * 1024), INBOUND_FORWARDS_PER_DAY: '3' }, ZONE);
    sent = await sendTo(s, 8);
    subjects = new Map(
      await Promise.all(
        sent.to.map(async (t) => {
          const mail = await simpleParser(s.sink.to(t.email)[0]!.raw);
          return [t.email, { messageId: mail.messageId ?? '', subject: mail.subject ?? '' }] as const;
        }),
      ),
    );
  });
  after(() => s.close());

  const reporting = async () => (await readEmail(s, sent.emailId)).reporting;
  const repliesOf = async (contactId: number) =>
    (await s.api.get(`/v3/templated_emails/${sent.emailId}/replies?contact_id=${contactId}&per_page=100`)).body.data;
  const forwardsTo = () => s.sink.to(AGENT);
  const forwardOf = async (marker: string) => {
    const found = await waitFor(`the forward of ${marker}`, async () => {
      for (const m of forwardsTo()) if (m.raw.includes(marker)) return m;
      return undefined;
    });
    return { sink: found, mail: await simpleParser(found.raw) };
  };

  test('a reply with a PDF: forwarded with the PDF, threaded to the email it answers, naming that email by its subject', async () => {
    const pat = sent.to[0]!;
    const pdf = Buffer.concat([Buffer.from('%PDF-1.4\n'), randomBytes(300_000), Buffer.from('\n%%EOF\n')]);
    const marker = `approval-${randomBytes(4).toString('hex')}`;
    const info = await client(s.port).sendMail({
      from: `Pat Contact <${pat.email}>`,
      to: pat.replyTo,
      subject: 'Re: my documents',
      text: `Here is my pre-approval letter (${marker}).`,
      inReplyTo: subjects.get(pat.email)!.messageId,
      references: [subjects.get(pat.email)!.messageId],
      attachments: [{ filename: 'pre-approval.pdf', content: pdf, contentType: 'application/pdf' }],
    });
    assert.match(info.response, /^250/);
    const { mail } = await forwardOf(marker);
    const [attachment, ...others] = mail.attachments;
    assert.equal(others.length, 0);
    assert.equal(attachment?.filename, 'pre-approval.pdf');
    assert.equal(attachment?.contentType, 'application/pdf');
    assert.ok(attachment?.content.equals(pdf), 'the PDF arrives byte for byte');
    const original = subjects.get(pat.email)!;
    assert.equal(mail.inReplyTo, original.messageId);
    assert.ok([mail.references ?? []].flat().includes(original.messageId), String(mail.references));
    assert.equal(mail.subject, 'Re: my documents');
    assert.ok(mail.text?.startsWith(`Pat Contact <${pat.email}> replied to your email “${original.subject}”.`), mail.text);
    assert.equal(mail.replyTo?.value[0]?.address, pat.email);
  });

  test('a reply without a subject gets the subject of the email it answers', async () => {
    const ann = sent.to[1]!;
    const marker = `nosubject-${randomBytes(4).toString('hex')}`;
    await client(s.port).sendMail({ from: ann.email, to: ann.replyTo, text: `Sure (${marker})` });
    const { mail } = await forwardOf(marker);
    assert.equal(mail.subject, `Re: ${subjects.get(ann.email)!.subject}`);
  });

  test('replies from IDN, UTF-8 and quoted-local-part addresses reach the agent (SMTPUTF8 where the address needs it)', async () => {
    const contact = sent.to[2]!;
    for (const [from, needsUtf8] of [
      ['maria@müller.example', false],
      ['josé@correo.example', true],
      ['"ann smith"@client.example', false],
    ] as const) {
      const marker = `intl-${randomBytes(4).toString('hex')}`;
      const info = await client(s.port).sendMail({
        // smtp-server (the receiver's SMTP) cannot parse a quoted local part with a space in MAIL
        // FROM; the contact's MTA gives its own bounce address there, as most do.
        envelope: { from: from.startsWith('"') ? 'bounces@client.example' : from, to: contact.replyTo },
        from: { name: 'Intl Contact', address: from },
        to: contact.replyTo,
        subject: 'Re: A question for you',
        text: `Yes please (${marker})`,
      });
      assert.match(info.response, /^250/, from);
      const { sink, mail } = await forwardOf(marker);
      assert.equal(sink.smtpUtf8, needsUtf8, `${from}: SMTPUTF8 ${sink.smtpUtf8}`);
      const replyTo = mail.replyTo?.value[0]?.address ?? '';
      // An IDN domain may travel as its A-label: the same address.
      const expected = from === 'maria@müller.example' ? ['maria@müller.example', 'maria@xn--mller-kva.example'] : [from];
      assert.ok(expected.includes(replyTo), `${from}: Reply-To ${replyTo}`);
    }
    const stored = await repliesOf(contact.contactId);
    assert.equal(stored.length, 3);
  });

  test('RCPT TO:<postmaster> without a domain is accepted (RFC 5321 4.1.1.3)', async () => {
    const info = await client(s.port).sendMail({
      envelope: { from: 'ops@mail.example', to: ['postmaster'] },
      raw: 'From: ops@mail.example\r\nTo: postmaster\r\nSubject: hello\r\nMessage-ID: <pm@mail.example>\r\n\r\nHello postmaster\r\n',
    });
    assert.deepEqual(info.accepted, ['postmaster']);
  });

  test('30 forged "Wells Fargo" messages to a reply address: stored and held (DMARC fail), none forwarded or counted', async () => {
    const target = sent.to[3]!;
    const before = forwardsTo().length;
    const replyBefore = (await reporting()).reply;
    // One connection for the 30, as a bulk sender keeps it open: a new connection each costs
    // about 120 ms of waiting here (4.3 s for the 30, against 0.7 s on one).
    const phish = nodemailer.createTransport({
      pool: true,
      maxConnections: 1,
      host: '127.0.0.1',
      port: s.port,
      secure: false,
      tls: { rejectUnauthorized: false },
    });
    const started = Date.now();
    for (let i = 0; i < 30; i++) {
      const info = await phish.sendMail({
        envelope: { from: 'alerts@wellsfargo.com', to: target.replyTo },
        from: '"Wells Fargo Online Security" <alerts@wellsfargo.com>',
        to: target.replyTo,
        subject: 'Unusual sign-in activity',
        html: '<p>Verify your account now: <a href="https://wellsfargo.example-verify.top/login">Sign on</a></p>',
      });
      assert.match(info.response, /^250/);
    }
    const stored = await repliesOf(target.contactId);
    assert.equal(stored.length, 30);
    for (const reply of stored) {
      assert.equal(reply.held_reason, 'dmarc_fail');
      assert.equal(reply.authentication.dmarc, 'fail');
      assert.equal(reply.authentication.spf, 'fail');
      assert.equal(reply.authentication.from_domain, 'wellsfargo.com');
      assert.match(reply.authentication.results, /dmarc=fail/);
    }
    // A forward goes out before the receiver answers 250: none went.
    assert.equal(forwardsTo().length, before, 'nothing reached the agent');
    assert.equal((await reporting()).reply, replyBefore, 'no reply counted');
    const delivery = (await s.api.get(`/v3/templated_emails/${sent.emailId}/deliveries?contact_id=${target.contactId}`)).body.data[0];
    assert.notEqual(delivery.state, 'replied');
    phish.close();
    process.stdout.write(`# 30 forged messages taken and held in ${Date.now() - started} ms\n`);
  });

  test('a reply whose DMARC passes (SPF and DKIM aligned) is forwarded with the verdict in Authentication-Results', async () => {
    const contact = sent.to[4]!;
    const marker = `signed-${randomBytes(4).toString('hex')}`;
    const raw = [
      'From: Lee Client <lee@client.example>',
      `To: ${contact.replyTo}`,
      'Subject: Re: A question for you',
      `Message-ID: <${marker}@client.example>`,
      `Date: ${new Date().toUTCString()}`,
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      `Friday works (${marker}).`,
      '',
    ].join('\r\n');
    const { signatures } = await dkimSign(raw, {
      canonicalization: 'relaxed/relaxed',
      signatureData: [
        { signingDomain: 'client.example', selector: 'sel1', privateKey: dkimKey.privateKey.export({ type: 'pkcs8', format: 'pem' }) },
      ],
    } as never);
    await client(s.port).sendMail({ envelope: { from: 'lee@client.example', to: contact.replyTo }, raw: signatures + raw });
    const { mail } = await forwardOf(marker);
    const results = String(mail.headers.get('authentication-results') ?? '');
    assert.match(results, new RegExp(`^${INBOUND_DOMAIN.replace(/\./g, '\\.')};`));
    assert.match(results, /spf=pass/);
    assert.match(results, /dkim=pass/);
    assert.match(results, /dmarc=pass/);
    assert.doesNotMatch(mail.text ?? '', /could not confirm/);
    const [stored] = await repliesOf(contact.contactId);
    assert.deepEqual([stored.authentication.spf, stored.authentication.dkim, stored.authentication.dmarc], ['pass', 'pass', 'pass']);
    assert.equal(stored.held_reason, null);
  });

  test('a sender whose domain publishes nothing is forwarded, said to be unconfirmed', async () => {
    const contact = sent.to[5]!;
    const marker = `unknown-${randomBytes(4).toString('hex')}`;
    await client(s.port).sendMail({ from: 'kim@nodmarc.example', to: contact.replyTo, subject: 'Re: hi', text: `ok (${marker})` });
    const { mail } = await forwardOf(marker);
    assert.match(
      mail.text ?? '',
      /could not confirm that this message comes from kim@nodmarc\.example \(SPF none, DKIM none, DMARC none\)/,
    );
    assert.match(String(mail.headers.get('authentication-results') ?? ''), /dmarc=none/);
  });

  test('INBOUND_FORWARDS_PER_DAY=3: the fourth and fifth replies to one address are stored and held, not forwarded', async () => {
    const contact = sent.to[6]!;
    const markers: string[] = [];
    for (let i = 0; i < 5; i++) {
      const marker = `limit-${i}-${randomBytes(4).toString('hex')}`;
      markers.push(marker);
      await client(s.port).sendMail({ from: contact.email, to: contact.replyTo, subject: 'Re: again', text: `${marker}` });
    }
    // Each forward goes out before the receiver answers 250.
    assert.deepEqual(
      markers.map((m) => forwardsTo().some((f) => f.raw.includes(m))),
      [true, true, true, false, false],
    );
    const stored = await repliesOf(contact.contactId);
    assert.equal(stored.length, 5);
    assert.deepEqual(stored.map((r: { held_reason: string | null }) => r.held_reason).sort(), [
      'forward_limit',
      'forward_limit',
      null,
      null,
      null,
    ]);
    // Another reply address is not affected.
    const other = sent.to[7]!;
    const marker = `other-${randomBytes(4).toString('hex')}`;
    await client(s.port).sendMail({ from: other.email, to: other.replyTo, subject: 'Re: hi', text: marker });
    await forwardOf(marker);
  });
});
