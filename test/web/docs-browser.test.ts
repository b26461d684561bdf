import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { Browser } from 'playwright-core';
import { DOCS_CSP } from '../../src/http/openapi.ts';
import { startTestApp } from '../support/test-app.ts';
import { launchChromium, skipBrowser } from './support/browser.ts';

test('/docs in a real browser: Redoc renders every operation with its code samples, no CSP violation', {
  timeout: 180_000,
  skip: skipBrowser,
}, async () => {
  const t = await startTestApp();
  let browser: Browser | undefined;
  try {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    const doc = JSON.parse((await t.app.inject('/v3/openapi.json')).body);
    const operationIds = Object.values(doc.paths).flatMap((item) => Object.values(item as object).map((op) => op.operationId as string));

    browser = await launchChromium();
    const page = await (await browser.newContext({ viewport: { width: 1300, height: 900 } })).newPage();
    const problems: string[] = [];
    const outside: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('request', (request) => {
      if (!request.url().startsWith(base) && !request.url().startsWith('blob:') && !request.url().startsWith('data:'))
        outside.push(request.url());
    });

    const answer = await page.goto(`${base}/docs`);
    assert.equal(answer?.headers()['content-security-policy'], DOCS_CSP);
    await page.getByRole('heading', { name: 'Create a voicemail drop' }).first().waitFor({ timeout: 120_000 });
    assert.equal(await page.title(), 'Hopper API reference');
    await page.getByText('Hopper is a self-hosted outreach service').first().waitFor();
    await page.getByRole('heading', { name: 'Authentication' }).first().waitFor();

    const rendered = await page
      .locator('[data-section-id^="operation/"]')
      .evaluateAll((nodes) => nodes.map((node) => node.getAttribute('data-section-id')?.replace(/^.*operation\//, '')));
    for (const id of operationIds) assert.ok(rendered.includes(id), `operation ${id} is on the page`);

    // The code samples of an operation: curl and the typed client.
    const create = page.locator('[data-section-id$="operation/createVoicemailDrop"]');
    await create.getByRole('tab', { name: 'curl' }).waitFor();
    await create.getByRole('tab', { name: 'Typed client' }).click();
    await create.getByText("hopper.api.POST('/v3/users/{user_id}/voicemail_drops'").first().waitFor();

    assert.deepEqual(problems, [], 'no CSP violation and no script error');
    assert.deepEqual(outside, [], 'nothing is loaded from another origin');
  } finally {
    await browser?.close();
    await t.close();
  }
});
