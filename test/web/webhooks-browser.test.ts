import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { waitFor } from '../sending/support/wait.ts';
import { asKey } from '../support/client.ts';
import { type Actor, createTeam, createUser } from '../support/factories.ts';
import {
  assertAccessible,
  assertClean,
  assertFitsWidth,
  assertInert,
  type BrowserRun,
  HOSTILE_TEXT,
  saveScreenshot,
  signIn,
  skipBrowser,
  startBrowserRun,
} from './support/browser.ts';
import { type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';
import { setPassword } from './web-client.ts';

const PASSWORD = 'webhook browser passphrase';
const WEBHOOKS = '/account/settings/webhooks';

/** The Webhooks tab in Debian's chromium, against a real receiver and the API. */
describe('the webhook pages in a browser', { skip: skipBrowser }, () => {
  let run: BrowserRun;
  let receiver: HttpReceiver;
  let agent: Actor;
  before(async () => {
    receiver = await startHttpReceiver();
    run = await startBrowserRun({
      workers: true,
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_POLL_INTERVAL: '50ms' },
    });
    agent = await createUser(run.t, 'User', await createTeam(run.t));
    await setPassword(run.t, agent.id, PASSWORD);
  });
  after(async () => {
    await run?.close();
    await receiver?.close();
  });

  test('an endpoint added by its labels gets a test event, shows the delivery and its attempt, and a resend reaches the receiver again', {
    timeout: 180_000,
  }, async () => {
    // JavaScript off, 375 px wide: every form posts and every answer is a page.
    const page = await run.newPage({ javaScript: false, width: 375 });
    await signIn(page, run.base, agent.email, PASSWORD, WEBHOOKS);
    await page.getByLabel('URL').fill(receiver.url);
    await page.getByLabel('Description').fill(HOSTILE_TEXT.slice(0, 500));
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByRole('link', { name: 'Events must have at least 1 items.' }).waitFor();
    assert.equal(await page.getByLabel('URL').inputValue(), receiver.url, 'what was typed is kept');
    await assertFitsWidth(page);
    await page.getByLabel('contact.created').check();
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = await page.getByLabel('Signing secret').inputValue();
    assert.match(secret, /^whsec_/);
    const id = Number(/\/webhooks\/(\d+)$/.exec(page.url())?.[1]);
    assert.deepEqual((await asKey(run.t.app, agent.key).get(`/v3/webhooks/${id}`)).body.events, ['contact.created']);
    await assertInert(page);
    await assertFitsWidth(page);

    await page.getByRole('button', { name: 'Send a test event' }).click();
    await page.getByText('A test event was queued').waitFor();
    assert.equal(await page.getByLabel('Signing secret').count(), 0, 'the secret is not shown again');
    const first = await waitFor('the test event received', () => receiver.received[0]);
    const event = new Webhook(secret).verify(first.body, first.headers as Record<string, string>) as { type: string };
    assert.equal(event.type, 'webhook.test');
    const [delivery] = await waitFor('the attempt recorded', async () => {
      const { data } = (await asKey(run.t.app, agent.key).get(`/v3/webhooks/${id}/deliveries`)).body;
      return data[0]?.state === 'delivered' && data;
    });
    await page.reload();
    const shown = page.locator(`[data-delivery="${delivery.id}"]`);
    assert.equal(await shown.locator('[data-delivery-state]').textContent(), 'Delivered');
    const attempt = shown.locator('tr[data-attempt="1"] td');
    assert.deepEqual((await attempt.allTextContents()).slice(0, 2), ['Succeeded', '200']);
    assert.equal((await attempt.nth(3).textContent())?.trim(), `${delivery.attempt_log[0].duration_ms.toLocaleString('en-US')} ms`);
    await assertFitsWidth(page);

    await shown.getByRole('button', { name: `Resend delivery ${delivery.id}` }).click();
    await page.getByText(`The webhook.test event of delivery ${delivery.id} is queued again.`).waitFor();
    await waitFor('the event received again', () => receiver.received.length === 2);
    assert.deepEqual(
      receiver.received.map((r) => r.headers['webhook-id']),
      [delivery.webhook_id, delivery.webhook_id],
      'the receiver got it twice, with the same webhook-id',
    );
    await waitFor('the second attempt recorded', async () => {
      const { data } = (await asKey(run.t.app, agent.key).get(`/v3/webhooks/${id}/deliveries`)).body;
      return data[0]?.attempt_log.length === 2 && data[0].state === 'delivered';
    });
    await page.reload();
    assert.equal(await shown.locator('tr[data-attempt]').count(), 2);

    // With script on (axe-core runs in the page): the endpoint's page and the tab; the screenshot
    // of docs/web.md with a description a person would give.
    await asKey(run.t.app, agent.key).put(`/v3/webhooks/${id}`, { description: 'CRM sync' });
    const checked = await run.newPage();
    await signIn(checked, run.base, agent.email, PASSWORD, `${WEBHOOKS}/${id}`);
    await assertAccessible(checked);
    await saveScreenshot(checked, 'webhooks');
    await checked.getByRole('link', { name: '← All endpoints' }).click();
    await checked.getByRole('heading', { name: 'Your endpoints' }).waitFor();
    await assertAccessible(checked);
    assertClean(run);
  });
});
