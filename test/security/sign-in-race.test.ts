import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MAX_PER_ACCOUNT } from '../../src/web/sign-in-throttle.ts';
import { createUser } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { browser } from '../web/web-client.ts';

/**
 * Finding: the sign-in throttle checked the wait, ran scrypt, then recorded the failure, so 60
 * guesses sent at once from fresh addresses all had their password checked (and the right one
 * among them signed in). Now an attempt is reserved before its password is checked.
 */
describe('the sign-in throttle under parallel guesses', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test(`200 guesses at once, each from its own address, check at most ${MAX_PER_ACCOUNT} passwords`, async () => {
    const password = 'the-right-password-42';
    const victim = await createUser(t, 'User', null, { password });
    // Each guesser has its own address (so the per-address limit is not what stops them) and its own form.
    const guessers = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const b = browser(t.app, `127.0.${Math.floor(i / 250)}.${(i % 250) + 1}`);
        await b.get('/login');
        return b;
      }),
    );
    // The right password is the last guess: it must not be checked once the wrong ones used the allowance.
    const answers = await Promise.all(
      guessers.map((b, i) => b.post('/login', { email: victim.email, password: i === 199 ? password : `wrong-${i}` })),
    );
    const counts = new Map<number, number>();
    for (const a of answers) counts.set(a.status, (counts.get(a.status) ?? 0) + 1);
    const checked = (counts.get(422) ?? 0) + (counts.get(303) ?? 0);
    assert.ok(checked <= MAX_PER_ACCOUNT, `passwords checked: ${checked} (${JSON.stringify(Object.fromEntries(counts))})`);
    assert.equal(checked + (counts.get(429) ?? 0), 200, 'every other guess was refused unchecked (429)');
    for (const a of answers.filter((x) => x.status === 429)) assert.match(String(a.headers['retry-after']), /^\d+$/);
  });

  test('a right password gives its reservation back: the owner is not locked out by their own sign-ins', async () => {
    const password = 'my-own-password-77';
    const owner = await createUser(t, 'User', null, { password });
    for (let i = 0; i < MAX_PER_ACCOUNT + 3; i++) {
      assert.equal((await browser(t.app, '127.1.0.1').signIn(owner.email, password)).status, 303, `sign-in ${i + 1}`);
    }
  });
});
