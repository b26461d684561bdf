import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import {
  outcomeOf,
  readDropCowboyCallback,
  readDropCowboyWebhook,
  verifyDropCowboySignature,
} from '../../src/voicemail/providers/drop-cowboy-events.ts';

/** The provider's own fixtures (test/fixtures/dropcowboy, copied from Drop-Cowboy/dropcowboy). */
function fixture(name: string): any {
  return JSON.parse(readFileSync(new URL(`../fixtures/dropcowboy/${name}`, import.meta.url), 'utf8'));
}

const v = fixture('signature-vectors.json');
const raw = (text: string) => Buffer.from(text, 'utf8');
/** The injected clock: the vectors' own "now". */
const check = (
  secrets: string[],
  headers: { signature?: string | undefined; timestamp?: string | undefined; version?: string | undefined },
  body: string,
  now: number,
) =>
  verifyDropCowboySignature(
    secrets,
    { signature: headers.signature, timestamp: headers.timestamp, version: headers.version },
    raw(body),
    now,
  );

describe("Drop Cowboy's signature vectors (examples/api/fixtures/signature-vectors.json, the nine cases of CONTRACT.md)", () => {
  const valid = { signature: v.signature, timestamp: v.timestamp };

  test('1. the signature verifies for raw_body + timestamp + secret at now_seconds_valid', () => {
    assert.deepEqual(check([v.secret], valid, v.raw_body, v.now_seconds_valid), { ok: true });
    assert.deepEqual(check([v.secret], { ...valid, version: 'v1' }, v.raw_body, v.now_seconds_valid), { ok: true });
  });
  test('2. the same inputs at now_seconds_stale: stale_timestamp', () => {
    assert.deepEqual(check([v.secret], valid, v.raw_body, v.now_seconds_stale), { ok: false, code: 'stale_timestamp' });
    // 300 s is the limit, both ways.
    const ts = Number(v.timestamp);
    assert.deepEqual(check([v.secret], valid, v.raw_body, ts + 300), { ok: true });
    assert.deepEqual(check([v.secret], valid, v.raw_body, ts - 301), { ok: false, code: 'stale_timestamp' });
  });
  test('3. tampered_raw_body: invalid_signature', () => {
    assert.deepEqual(check([v.secret], valid, v.tampered_raw_body, v.now_seconds_valid), { ok: false, code: 'invalid_signature' });
  });
  test('4. signature_from_other_secret: invalid_signature', () => {
    const other = { signature: v.signature_from_other_secret, timestamp: v.timestamp };
    assert.deepEqual(check([v.secret], other, v.raw_body, v.now_seconds_valid), { ok: false, code: 'invalid_signature' });
    // …and it is other_secret's signature indeed.
    assert.deepEqual(check([v.other_secret], other, v.raw_body, v.now_seconds_valid), { ok: true });
  });
  test('5. two secrets configured, the second matches: accepted', () => {
    assert.deepEqual(check([v.other_secret, v.secret], valid, v.raw_body, v.now_seconds_valid), { ok: true });
    assert.deepEqual(check([v.other_secret], valid, v.raw_body, v.now_seconds_valid), { ok: false, code: 'invalid_signature' });
  });
  test('6. a missing signature header or timestamp: missing_signature', () => {
    assert.deepEqual(check([v.secret], { timestamp: v.timestamp }, v.raw_body, v.now_seconds_valid), {
      ok: false,
      code: 'missing_signature',
    });
    assert.deepEqual(check([v.secret], { signature: v.signature }, v.raw_body, v.now_seconds_valid), {
      ok: false,
      code: 'missing_signature',
    });
  });
  test('7. a header without the sha256= prefix: invalid_signature', () => {
    const bare = { signature: v.signature.replace(/^sha256=/, ''), timestamp: v.timestamp };
    assert.deepEqual(check([v.secret], bare, v.raw_body, v.now_seconds_valid), { ok: false, code: 'invalid_signature' });
  });
  test('8. a non-numeric timestamp: stale_timestamp', () => {
    const words = { signature: v.signature, timestamp: 'yesterday' };
    assert.deepEqual(check([v.secret], words, v.raw_body, v.now_seconds_valid), { ok: false, code: 'stale_timestamp' });
  });
  test('9. an unsupported X-Signature-Version: invalid_signature', () => {
    assert.deepEqual(check([v.secret], { ...valid, version: 'v2' }, v.raw_body, v.now_seconds_valid), {
      ok: false,
      code: 'invalid_signature',
    });
  });
});

describe("Drop Cowboy's result fixtures read into delivery outcomes", () => {
  test('webhook.rvm-status.json: contact.rvm.status, success with reason_code 0 → delivered, matched by `to`', () => {
    const event = readDropCowboyWebhook(fixture('webhook.rvm-status.json'), undefined);
    assert.ok(event);
    assert.deepEqual(
      { ...event, occurredAt: event.occurredAt?.toISOString() },
      {
        eventId: '2694f968-93fd-44ca-9b92-2110ed1ee61e',
        event: 'contact.rvm.status',
        occurredAt: '2026-03-20T21:25:12.000Z',
        status: 'success',
        reasonCode: 0,
        reason: undefined,
        to: '+13125550142',
        dropId: 'b3e7a1c9-8d5f-4b2e-9a6c-1f4d7b3e8a52',
        proofUrl: undefined,
      },
    );
    assert.deepEqual(outcomeOf(event), {
      delivered: true,
      reason: null,
      outcome: { classification: 'delivered', permanent: false, code: '0', description: null },
    });
  });

  test('webhook.rvm-receipt.json: contact.rvm.receipt, 4002 → failed (mailbox full, not retried) with its proof of delivery', () => {
    const event = readDropCowboyWebhook(fixture('webhook.rvm-receipt.json'), undefined);
    assert.ok(event);
    assert.equal(event.event, 'contact.rvm.receipt');
    assert.equal(event.to, '+13125550142');
    assert.equal(event.reasonCode, 4002);
    assert.equal(event.proofUrl, 'https://api-v2.dropcowboy.com/campaign/public/receipts/MmEX1fWLLQRmf68M1Yg82jkHN3-P7y8VyDxXhnyHA50');
    const outcome = outcomeOf(event);
    assert.equal(outcome?.delivered, false);
    assert.match(outcome?.reason ?? '', /voicemail box is full \(not retried\) \[reason code 4002\] \(Drop Cowboy said: VoiceMail Full\)/);
    assert.deepEqual(outcome?.outcome, { classification: 'mailbox_full', permanent: false, code: '4002', description: 'VoiceMail Full' });
  });

  test('callback.rvm-success.json: flat, echoes foreign_id, success → delivered, with its proof of delivery', () => {
    const callback = readDropCowboyCallback(fixture('callback.rvm-success.json'));
    assert.equal(callback.foreignId, '7c1e5a93-2d4b-4f68-a0b9-3e6d8c1f5a27');
    assert.equal(callback.to, '+13125550142');
    assert.equal(callback.dropId, 'b3e7a1c9-8d5f-4b2e-9a6c-1f4d7b3e8a52');
    assert.equal(callback.occurredAt?.toISOString(), '2026-03-20T15:04:05.000Z');
    assert.equal(callback.proofUrl, 'https://api-v2.dropcowboy.com/campaign/public/receipts/i9aI2nYpHEzKX0vysXph0ZGIYphbAduqA2PRRge0ICQ');
    assert.deepEqual(outcomeOf(callback), {
      delivered: true,
      reason: null,
      outcome: { classification: 'delivered', permanent: false, code: '0', description: null },
    });
  });

  test('reason codes decide, never the text: each failure tells the operator what to fix', () => {
    const reason = (code: number, status = 'failure') =>
      outcomeOf({ status, reasonCode: code, reason: undefined, to: undefined, dropId: undefined, proofUrl: undefined });
    assert.deepEqual(
      reason(0, 'failure'),
      { delivered: true, reason: null, outcome: { classification: 'delivered', permanent: false, code: '0', description: null } },
      'code 0 wins over the status text',
    );
    assert.equal(reason(4001, 'success')?.delivered, false);
    const fixes: Record<number, RegExp> = {
      3000: /no funds: add funds/,
      3001: /could not use the audio/,
      3007: /fix DROPCOWBOY_KEY and DROPCOWBOY_SECRET/,
      3014: /unset DROPCOWBOY_AUDIO_URL/,
      4001: /No voicemail box.*not retried/,
      4002: /full.*not retried/,
      4010: /set DROPCOWBOY_PHONE_LINE_ID/,
    };
    for (const [code, pattern] of Object.entries(fixes)) assert.match(reason(Number(code))?.reason ?? '', pattern, code);
    assert.equal(reason(9999)?.reason, 'Drop Cowboy reason code 9999');
    // Hopper's classes (docs/outcomes.md): a dead number and a missing consent suppress it; a full or missing box does not.
    const classes: Record<number, [string, boolean]> = {
      3000: ['account', false],
      3001: ['audio', false],
      4001: ['no_voicemail_box', false],
      4002: ['mailbox_full', false],
      4004: ['invalid_number', true],
      4010: ['configuration', false],
      6011: ['no_consent', true],
      9999: ['failed', false],
    };
    for (const [code, [classification, permanent]] of Object.entries(classes)) {
      const outcome = reason(Number(code))?.outcome;
      assert.deepEqual(
        [outcome?.classification, outcome?.permanent, outcome?.suppress ?? false, outcome?.code],
        [classification, permanent, permanent, code],
        code,
      );
    }
    assert.equal(reason(4004)?.outcome.description, 'Number not reachable', "Drop Cowboy's name of the code when it gives no words");
    assert.equal(
      outcomeOf({ status: undefined, reasonCode: undefined, reason: undefined, to: undefined, dropId: undefined, proofUrl: undefined }),
      undefined,
    );
  });

  test('bodies that are not events are refused', () => {
    assert.equal(readDropCowboyWebhook([], undefined), undefined);
    assert.equal(readDropCowboyWebhook({ event: 'contact.rvm.status' }, undefined), undefined);
    assert.equal(readDropCowboyWebhook({ event: 'contact.rvm.status' }, 'from-header')?.eventId, 'from-header');
  });

  test('numbers are read as Hopper sends them (E.164), whatever their punctuation', () => {
    const to = (value: unknown) =>
      readDropCowboyWebhook({ event_id: 'e', event: 'contact.rvm.status', data: { to: value } }, undefined)?.to;
    assert.equal(to('+13125550142'), '+13125550142');
    assert.equal(to('13125550142'), '+13125550142');
    assert.equal(to('(312) 555-0142'), '+13125550142');
    assert.equal(to('+442071838750'), '+442071838750');
    assert.equal(to(null), undefined);
  });
});
