import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { loadConfig } from '../../../src/config.ts';
import { loadTls } from '../../../src/tls.ts';
import { startInboundApp } from '../../inbound/support.ts';
import { startTestApp, type TestApp, type TestAppOptions } from '../../support/test-app.ts';
import { tools } from '../../support/tools.ts';

/**
 * The pages in a real browser: Hopper over real HTTPS on loopback, Debian's chromium driven by
 * playwright-core (never a downloaded browser). Every page a test opens is watched for console
 * errors (a script that fails, a resource the CSP blocks) and for dialogs (an injected script that
 * ran); `assertClean` fails on any, and `assertAccessible` on any serious or critical violation
 * axe-core finds.
 */
export interface BrowserRun {
  t: TestApp;
  base: string;
  context: BrowserContext;
  /** Console errors and dialogs seen so far on any page, with the page's URL. */
  problems: string[];
  newPage(options?: { javaScript?: boolean; width?: number }): Promise<Page>;
  close(): Promise<void>;
}

export const skipBrowser = tools.chromium.skip;

type InboundApp = Awaited<ReturnType<typeof startInboundApp>>;

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A certificate for Hopper's HTTPS in a scratch directory, and how to remove it. */
export async function testCertificate(): Promise<{ key: string; cert: string; remove(): Promise<void> }> {
  const scratch = await mkdtemp(join(tmpdir(), 'hopper-pages-'));
  const tls = await loadTls(loadConfig({ DATA_DIR: join(scratch, 'tls-data') }));
  return { key: tls.key, cert: tls.cert, remove: () => rm(scratch, { recursive: true, force: true }) };
}

/** Debian's chromium, headless, with the flags every run here uses (no sandbox, GPU, QUIC or background traffic). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: tools.chromium.path, headless: true, args: CHROMIUM_ARGS });
}

/** Hopper (a plain test app) over HTTPS with chromium pointed at it. */
export async function startBrowserRun(options: TestAppOptions = {}): Promise<BrowserRun> {
  const tls = await testCertificate();
  const t = await startTestApp({ ...options, https: { key: tls.key, cert: tls.cert } });
  return openBrowser(t, async () => {
    await t.close();
    await tls.remove();
  });
}

/** Chromium for an app started with `https` (it is made to listen on loopback); `close` ends the browser, then calls `closeApp`. */
export async function openBrowser(t: TestApp, closeApp: () => Promise<void>): Promise<BrowserRun> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const base = `https://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const browser = await launchChromium();
  const problems: string[] = [];
  const contexts: BrowserContext[] = [];
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1100, height: 900 } });
  contexts.push(context);

  function watch(page: Page): Page {
    // A wait that cannot succeed fails in seconds, naming what it waited for, not at the test's timeout.
    page.setDefaultTimeout(15_000);
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      // A refused form answers 4xx on purpose (422), and a page of another's message 403: Chrome
      // logs the document's own status as an error. Any other resource that fails (a stylesheet,
      // a script, an image) is a defect.
      const own = message.location().url === page.url() && /status of 4\d\d/.test(message.text());
      if (!own) problems.push(`${page.url()}: console error: ${message.text()} (${message.location().url})`);
    });
    page.on('pageerror', (error) => problems.push(`${page.url()}: page error: ${error.message}`));
    page.on('dialog', async (dialog) => {
      problems.push(`${page.url()}: a dialog opened (injected script ran?): ${dialog.message()}`);
      await dialog.dismiss();
    });
    return page;
  }

  return {
    t,
    base,
    context,
    problems,
    async newPage({ javaScript = true, width } = {}) {
      if (javaScript && width === undefined) return watch(await context.newPage());
      // Another context shares nothing (cookies, storage): the caller signs in again.
      const other = await browser.newContext({
        ignoreHTTPSErrors: true,
        javaScriptEnabled: javaScript,
        viewport: { width: width ?? 1100, height: 900 },
      });
      contexts.push(other);
      return watch(await other.newPage());
    },
    async close() {
      for (const c of contexts) await c.close().catch(() => {});
      await browser.close().catch(() => {});
      await closeApp();
    },
  };
}

/** Signs in through the form, as a person would, and waits for the page it leads to. */
export async function signIn(page: Page, base: string, email: string, password: string, path = '/'): Promise<void> {
  await page.goto(`${base}/login?next=${encodeURIComponent(path)}`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${base}${path}`);
}

/**
 * A page of its own browser context (its own cookies), signed in through the form and at `path`:
 * by default a phone's 375 px with JavaScript off, as the forms are checked.
 */
export async function signedInPage(
  run: BrowserRun,
  who: { email: string; password: string },
  path = '/',
  { javaScript = false, width = 375 }: { javaScript?: boolean; width?: number } = {},
): Promise<Page> {
  const page = await run.newPage({ javaScript, width });
  await signIn(page, run.base, who.email, who.password, path);
  return page;
}

/**
 * The inbound receiver's app (test/inbound/support.ts: workers, an SMTP sink, the receiver) over
 * HTTPS with chromium pointed at it: the pages of mail that was sent and answered.
 */
export async function startInboundBrowserRun(env: Record<string, string> = {}): Promise<{ s: InboundApp; run: BrowserRun }> {
  const tls = await testCertificate();
  const s = await startInboundApp(env, {}, { https: { key: tls.key, cert: tls.cert } });
  const run = await openBrowser(s.t, async () => {
    await s.close();
    await tls.remove();
  });
  return { s, run };
}

/**
 * No serious or critical accessibility violation on the page as it is (WCAG 2.x A and AA rules,
 * and axe's best practices). Frames are left out: the only one is a report's sandboxed preview,
 * which holds the email as its sender wrote it and runs no script (axe-core would wait for ever to
 * run in it).
 */
export async function assertAccessible(page: Page, what = page.url()): Promise<void> {
  const results = await new AxeBuilder({ page }).exclude('iframe[sandbox]').analyze();
  const bad = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(
    bad.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
    [],
    `axe-core on ${what}`,
  );
}

/** No console error, failed script or dialog on any page of the run so far. */
export function assertClean(run: BrowserRun): void {
  assert.deepEqual(run.problems, [], "the browser's console");
}

/** Nothing wider than the viewport forces a sideways scroll of the whole page (tables scroll inside their own box). */
export async function assertFitsWidth(page: Page): Promise<void> {
  const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
  assert.ok(overflow <= 1, `${page.url()} is ${overflow} px wider than its ${page.viewportSize()?.width} px viewport`);
}

/**
 * Hostile text for names, subjects and replies: a script, an image whose error handler runs, a
 * javascript: link, CSS that would hide the page or load from elsewhere, and a closing tag that
 * would end a textarea or title early. Rendered as text, each shows literally and does nothing.
 */
export const HOSTILE = {
  script: '<script>alert("script ran")</script>',
  onerror: '<img src=x onerror="alert(\'onerror ran\')">',
  javascriptLink: '<a href="javascript:alert(\'link ran\')">click me</a>',
  css: '<style>body{display:none}</style><div style="position:fixed;inset:0;background:url(https://attacker.example/x)">',
  breakout: '</textarea></title>"><svg onload=alert("svg ran")>',
} as const;
export const HOSTILE_TEXT = Object.values(HOSTILE).join(' ');

/**
 * The page shows hostile text inert: no element, attribute or link it would have made exists in
 * the document (outside sandboxed frames), and the page is still visible.
 */
export async function assertInert(page: Page): Promise<void> {
  // Run in the page: the browser's DOM, not Node's types.
  const found = await page.evaluate(`({
    scripts: [...document.scripts].filter((s) => !s.src).length,
    handlers: document.querySelectorAll('[onerror], [onload], [onclick]').length,
    javascriptLinks: [...document.querySelectorAll('a[href]')].filter((a) => /^\\s*javascript:/i.test(a.getAttribute('href') ?? '')).length,
    styles: document.querySelectorAll('style, [style]').length,
    hidden: getComputedStyle(document.body).display === 'none',
  })`);
  assert.deepEqual(
    found,
    { scripts: 0, handlers: 0, javascriptLinks: 0, styles: 0, hidden: false },
    `${page.url()} keeps hostile text inert`,
  );
}

const ROOT = join(import.meta.dirname, '..', '..', '..');

/**
 * Saves the whole page as `artifacts/<name>.png`, to look at after a run. The screenshots in docs/
 * are made by `npm run docs:screenshots` (scripts/screenshots.ts), never by a test.
 */
export async function saveScreenshot(page: Page, name: string): Promise<void> {
  await mkdir(join(ROOT, 'artifacts'), { recursive: true });
  await page.screenshot({ path: join(ROOT, 'artifacts', `${name}.png`), fullPage: true });
}
