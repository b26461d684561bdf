import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import MailComposer from 'nodemailer/lib/mail-composer';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { composeMime } from '../../src/email/compose-mime.ts';
import { createDkimSigner } from '../../src/email/dkim.ts';
import type { OutgoingEmail } from '../../src/email/render.ts';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';

/**
 * DKIM judged by a third-party verifier (mailauth's dkimVerify) with its DNS stubbed to answer
 * the test's public key: messages from the fast path (compose-mime.ts, through the engine and a
 * real SMTP sink) and from nodemailer's composer verify; an altered signed header fails.
 */
function keyPair(type: 'rsa' | 'ed25519') {
  const { privateKey, publicKey } = type === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: 2048 }) : generateKeyPairSync('ed25519');
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  // An Ed25519 key record holds the raw 32-byte key (RFC 8463); an RSA one the SPKI.
  const p = (type === 'ed25519' ? spki.subarray(spki.length - 32) : spki).toString('base64');
  return { pem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, record: `v=DKIM1; k=${type}; p=${p}` };
}

const resolverFor = (records: Record<string, string>) => async (name: string, type: string) => {
  const record = records[name];
  if (type !== 'TXT' || !record) throw Object.assign(new Error(`no ${type} for ${name}`), { code: 'ENOTFOUND' });
  return [[record]];
};

async function verdicts(raw: string | Buffer, records: Record<string, string>) {
  const result = await dkimVerify(raw, { resolver: resolverFor(records) as never });
  return result.results.map((r) => ({ result: r.status.result, domain: r.signingDomain, headers: r.signingHeaders?.keys }));
}

describe('DKIM', () => {
  let dir: string;
  const rsa = keyPair('rsa');
  const ed = keyPair('ed25519');
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'hopper-dkim-'));
    await writeFile(join(dir, 'rsa.pem'), rsa.pem);
    await writeFile(join(dir, 'ed.pem'), ed.pem);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const email: OutgoingEmail = {
    messageId: '<templated_email-1.2@hopper.test>',
    from: { name: 'Jane Doe', address: 'jane@mail.agents.example' },
    replyTo: { name: 'Jane Doe', address: 'r-00@in.hopper.test' },
    to: 'pat@example.com',
    subject: 'Spring in the neighbourhood — café prices',
    html: '<p>Hello Pat</p>',
    text: 'Hello Pat',
    headers: {
      'List-Unsubscribe': '<https://hopper.test/unsubscribe/x>',
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    },
  };

  for (const [name, key] of [
    ['RSA 2048', 'rsa'],
    ['Ed25519', 'ed'],
  ] as const) {
    test(`${name}: the fast path's and nodemailer's messages verify, relaxed, with the required headers signed`, async () => {
      const config = loadConfig({ DKIM_DOMAIN: 'agents.example', DKIM_SELECTOR: 'hop1', DKIM_PRIVATE_KEY_FILE: join(dir, `${key}.pem`) });
      const sign = createDkimSigner(config.dkim!);
      const records = { 'hop1._domainkey.agents.example': (key === 'rsa' ? rsa : ed).record };
      const fast = composeMime(email, new Date())!;
      const slow = await new MailComposer(email).compile().build();
      for (const raw of [fast.raw, slow]) {
        const signed = await sign(raw, 'jane@mail.agents.example');
        const text = signed.toString();
        assert.match(text, /^DKIM-Signature: [\s\S]*c=relaxed\/relaxed/);
        const [verdict] = await verdicts(signed, records);
        assert.equal(verdict?.result, 'pass', JSON.stringify(verdict));
        assert.equal(verdict?.domain, 'agents.example');
        for (const header of [
          'from',
          'to',
          'subject',
          'date',
          'message-id',
          'mime-version',
          'content-type',
          'list-unsubscribe',
          'list-unsubscribe-post',
        ]) {
          assert.ok(
            verdict?.headers
              ?.toLowerCase()
              .split(':')
              .map((h) => h.trim())
              .includes(header),
            `${header} signed: ${verdict?.headers}`,
          );
        }
        // A signed header altered on the way: the signature no longer holds.
        const tampered = text.replace(/^Subject: .*$/m, 'Subject: You won a prize');
        assert.notEqual(tampered, text);
        assert.equal((await verdicts(tampered, records))[0]?.result, 'fail');
        const rerouted = text.replace('List-Unsubscribe-Post: List-Unsubscribe=One-Click', 'List-Unsubscribe-Post: nope');
        assert.equal((await verdicts(rerouted, records))[0]?.result, 'fail');
      }
    });
  }

  test('a From outside DKIM_DOMAIN is not signed', async () => {
    const config = loadConfig({ DKIM_DOMAIN: 'agents.example', DKIM_SELECTOR: 'hop1', DKIM_PRIVATE_KEY_FILE: join(dir, 'rsa.pem') });
    const raw = composeMime({ ...email, from: 'x@other.example' }, new Date())!.raw;
    assert.equal(await createDkimSigner(config.dkim!)(raw, 'x@other.example'), raw);
  });

  test('start refuses a key it cannot read, a short RSA key, or a partial setting, naming the variable', async () => {
    const short = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    await writeFile(join(dir, 'short.pem'), short);
    await writeFile(join(dir, 'junk.pem'), 'not a key');
    for (const [env, pattern] of [
      [{ DKIM_PRIVATE_KEY_FILE: join(dir, 'missing.pem') }, /DKIM_PRIVATE_KEY_FILE cannot be read/],
      [{ DKIM_PRIVATE_KEY_FILE: join(dir, 'short.pem') }, /RSA key of 2048 bits or more/],
      [{ DKIM_PRIVATE_KEY_FILE: join(dir, 'junk.pem') }, /not a PEM private key/],
      [{ DKIM_PRIVATE_KEY_FILE: '' }, /must be set together/],
    ] as const) {
      assert.throws(
        () => loadConfig({ DKIM_DOMAIN: 'agents.example', DKIM_SELECTOR: 'hop1', ...env }),
        (error: Error) => error instanceof ConfigError && pattern.test(error.message),
      );
    }
  });

  describe('through the engine and a real SMTP server', () => {
    let s: SendingApp;
    before(async () => {
      s = await startSendingApp({
        SENDER_DOMAINS: 'agents.example',
        DKIM_DOMAIN: 'agents.example',
        DKIM_SELECTOR: 'hop1',
        DKIM_PRIVATE_KEY_FILE: join(dir, 'rsa.pem'),
        INBOUND_DOMAIN: 'in.hopper.test',
      });
    });
    after(() => s.close());

    test('every email the engine sends for a sender at DKIM_DOMAIN verifies', async () => {
      const put = await s.api.put(`/v3/users/${s.owner}`, { sender_email: 'jane@agents.example' });
      assert.equal(put.status, 200, put.raw);
      const people = await audience(s, 3);
      const sent = await createEmail(s, { status: 'Scheduled', recipients: toTag(people) });
      assert.equal((await waitForStatus(s, sent.id, ['Sent', 'Failed'])).status, 'Sent');
      for (const contact of people.contacts) {
        const [message] = s.sink.to(contact.email);
        assert.ok(message);
        const [verdict] = await verdicts(message.raw, { 'hop1._domainkey.agents.example': rsa.record });
        assert.equal(verdict?.result, 'pass', JSON.stringify(verdict));
        assert.match(message.from, /^b-[0-9a-f]{52}@in\.hopper\.test$/);
      }
    });
  });
});
