import { generateKeyPairSync } from 'node:crypto';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { authenticateArrival } from '../src/inbound/authentication.ts';
import { zoneResolver } from '../test/inbound/dns.ts';

/**
 * `npm run bench:inbound-auth`: what checking a reply's SPF, DKIM and DMARC (mailauth, in the
 * receiver before a reply is recorded) costs per message, in CPU time of this process, with the
 * DNS answered from memory (test/inbound/dns.ts) so that only the checks are measured: an
 * unsigned reply from a domain with SPF and DMARC records, and one signed with RSA-2048 and with
 * Ed25519. BENCH_MESSAGES (default 500) of each, one after the other.
 */
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 500);
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ed = generateKeyPairSync('ed25519');
const record = (key: typeof rsa.publicKey, k: string) =>
  `v=DKIM1; k=${k}; p=${
    k === 'ed25519'
      ? key.export({ type: 'spki', format: 'der' }).subarray(-32).toString('base64')
      : key.export({ type: 'spki', format: 'der' }).toString('base64')
  }`;
const resolver = zoneResolver({
  'client.example': { TXT: ['v=spf1 ip4:192.0.2.0/24 ip4:127.0.0.1 -all'] },
  '_dmarc.client.example': { TXT: ['v=DMARC1; p=quarantine'] },
  'rsa._domainkey.client.example': { TXT: [record(rsa.publicKey, 'rsa')] },
  'ed._domainkey.client.example': { TXT: [record(ed.publicKey, 'ed25519')] },
});

const message = (i: number) =>
  [
    'From: Lee Client <lee@client.example>',
    'To: r-token@in.hopper.bench',
    'Subject: Re: New listings for you',
    `Message-ID: <bench-${i}@client.example>`,
    `Date: ${new Date().toUTCString()}`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    `Thanks! Could we talk on Thursday about the house on Elm Street? (${i})`,
    '',
  ].join('\r\n');

async function signed(raw: string, selector: string, privateKey: typeof rsa.privateKey): Promise<Buffer> {
  const { signatures } = await dkimSign(raw, {
    canonicalization: 'relaxed/relaxed',
    signatureData: [{ signingDomain: 'client.example', selector, privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) }],
  } as never);
  return Buffer.from(signatures + raw);
}

const arrival = { ip: '127.0.0.1', helo: 'mx.client.example', sender: 'lee@client.example' };
console.log(`bench:inbound-auth — ${MESSAGES} replies of each kind, DNS from memory`);
for (const [name, make] of [
  ['unsigned (SPF and DMARC pass)', async (i: number) => Buffer.from(message(i))],
  ['DKIM RSA-2048 (all pass)', (i: number) => signed(message(i), 'rsa', rsa.privateKey)],
  ['DKIM Ed25519 (all pass)', (i: number) => signed(message(i), 'ed', ed.privateKey)],
] as const) {
  const inputs = await Promise.all(Array.from({ length: MESSAGES }, (_, i) => make(i)));
  const { stored: verdict } = await authenticateArrival(inputs[0] as Buffer, arrival, 'in.hopper.bench', resolver);
  const started = process.cpuUsage();
  const wall = performance.now();
  for (const raw of inputs) await authenticateArrival(raw, arrival, 'in.hopper.bench', resolver);
  const cpu = process.cpuUsage(started);
  const perMessage = (cpu.user + cpu.system) / MESSAGES;
  console.log(
    `  ${name.padEnd(32)} ${perMessage.toFixed(0)} µs CPU per message, ${((performance.now() - wall) / MESSAGES).toFixed(2)} ms wall` +
      ` (spf=${verdict.spf} dkim=${verdict.dkim} dmarc=${verdict.dmarc})`,
  );
}
