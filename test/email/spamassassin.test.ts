import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { audience, createEmail, type SendingApp, startSendingApp, toTag, waitForStatus } from '../sending/support/sending-app.ts';

/**
 * Deliverability judged by a third party: Debian's SpamAssassin (installed by .ci/run), local
 * tests only (-L, no network lookups), scores a realistic keep-in-touch email — about 150 words,
 * a signature, the agent's postal address, sent by the engine through the fast path — at 1.0 or less.
 */
const BODY = `
<p>I hope your spring is off to a good start. I was driving past Maple Court this morning and
thought of you and the garden you planted when you moved in three years ago.</p>
<p>A few neighbours have asked me what their homes might be worth this year, so I put together a short
summary of what sold on your street and the streets around it since January. Prices have held
steady, and the homes that sold went under contract in about three weeks.</p>
<p>If you are curious about your own home, or you simply want to talk through a project like a new
kitchen or a bigger yard, I am happy to stop by for a coffee. There is no rush and no obligation at
all; I enjoy keeping up with the families I have worked with.</p>
<p>Say hello to Sam and the kids for me, and enjoy the long weekend.</p>`;

const hasSpamAssassin = spawnSync('spamassassin', ['--version']).status === 0;

/** Sends the email through the engine (fast path, a real SMTP sink) and asks SpamAssassin. */
async function judge(env: Record<string, string>): Promise<{ score: number; rules: string[]; report: string }> {
  const s: SendingApp = await startSendingApp({ SENDER_DOMAINS: 'maplerealty.com', MAIL_FROM: 'Hopper <mail@maplerealty.com>', ...env });
  try {
    const put = await s.api.put(`/v3/users/${s.owner}`, {
      first_name: 'Jane',
      last_name: 'Morales',
      sender_email: 'jane@maplerealty.com',
      postal_address: 'Maple Realty\n410 Harbor Drive, Suite 200\nSarasota, FL 34236',
    });
    assert.equal(put.status, 200, put.raw);
    const signature = await s.api.post(`/v3/users/${s.owner}/signatures`, {
      name: 'Main',
      body: '<p>Jane Morales<br>Maple Realty<br>(941) 555-0142</p>',
    });
    assert.equal(signature.status, 201, signature.raw);
    const people = await audience(s, 1, () => ({ first_name: 'Chris', last_name: 'Walker', email: 'chris.walker@example.org' }));
    const email = await createEmail(s, {
      subject: 'Spring on Maple Court',
      body: BODY,
      closing: 'Warm regards,',
      signature_id: signature.body.id,
      status: 'Scheduled',
      recipients: toTag(people),
    });
    assert.equal((await waitForStatus(s, email.id, ['Sent', 'Failed'])).status, 'Sent');
    const [message] = s.sink.to('chris.walker@example.org');
    assert.ok(message);
    const run = spawnSync('spamassassin', ['-L', '-t'], { input: message.raw, encoding: 'utf8', timeout: 120_000 });
    const status = /^X-Spam-Status: (?:Yes|No), score=(-?[\d.]+)/m.exec(run.stdout);
    assert.ok(status, `spamassassin answered: ${run.stderr}${run.stdout.slice(0, 400)}`);
    const report = run.stdout.slice(run.stdout.indexOf('Content analysis details'));
    const rules = [...report.matchAll(/^\s*-?\d+(?:\.\d+)?\s+([A-Z][A-Z0-9_]+)/gm)].map((m) => m[1] as string);
    return { score: Number(status[1]), rules, report };
  } finally {
    await s.close();
  }
}

describe('SpamAssassin', () => {
  test('the BODY is a realistic keep-in-touch length', () => {
    const words = BODY.replace(/<[^>]+>/g, ' ')
      .split(/\s+/)
      .filter(Boolean).length;
    assert.ok(words >= 140 && words <= 200, `${words} words`);
  });

  test('a keep-in-touch email from the fast path scores 1.0 or less with spamassassin -L -t; the open pixel adds only HTML_IMAGE_ONLY_*', async (t) => {
    if (!hasSpamAssassin) return t.skip('spamassassin is not installed (.ci/run installs it)');
    const plain = await judge({ TRACK_OPENS: 'false' });
    t.diagnostic(`SpamAssassin score without the open pixel: ${plain.score} (${plain.rules.join(', ')})`);
    assert.ok(plain.score <= 1.0, `score ${plain.score}:\n${plain.report}`);
    // With the open pixel (the default), SpamAssassin's local rules see an <img> in a short HTML
    // text (HTML_IMAGE_ONLY_04…32, about +1 to +2): that rule, and nothing else, comes on top.
    const tracked = await judge({});
    t.diagnostic(`SpamAssassin score with the open pixel: ${tracked.score} (${tracked.rules.join(', ')})`);
    const added = tracked.rules.filter((r) => !plain.rules.includes(r));
    assert.ok(
      added.every((r) => /^HTML_IMAGE_ONLY_\d\d$/.test(r)),
      `rules the pixel added: ${added.join(', ')}`,
    );
  });
});
