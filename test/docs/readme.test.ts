import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, test } from 'node:test';
import { freePort, type HopperProcess, startHopper, stopHopper } from '../sending/support/hopper-process.ts';
import { scriptOf, shellBlocks } from './shell-blocks.ts';

/**
 * The README and docs/*.md run as written. A fresh Hopper is started as the README says
 * (`node src/main.ts`, embedded PGlite in a temporary DATA_DIR, a free PORT); then each file's
 * shell blocks run in order in one bash session of their own, `set -eo pipefail`, in a fresh
 * directory where that DATA_DIR is `data/` (so `--cacert data/tls/cert.pem` works as in the
 * README). README.md runs first, on the empty server; the other files after it, so they must not
 * assume ids or the absence of other rows (one server keeps the whole test near 30 s).
 *
 * Conventions for writers:
 * - ```sh and ```bash blocks run; any other fence (```console, ```text, ```json, ```js, bare) is
 *   shown only. A block right after a `<!-- not run -->` line (a reason may follow:
 *   `<!-- not run: needs a Slybroadcast account -->`) is not run either.
 * - Every HTTP answer must be 2xx, except where the text announces the status in a comment
 *   `# → NNN` at the end of the command or on the line right after it (`# → 404 later reads fail`).
 *   An announced status is checked exactly, 2xx included (`# → 201` must be a 201). `curl` is
 *   wrapped in the session to see each status (test/docs/prelude.sh), so this holds for `curl`
 *   written out as well as for helpers such as the README's `hcurl`.
 * - The session provides what a reader sets by hand from the first start's output: `HOPPER`
 *   (…/v3) and `KEY` (the printed Administrator key), and for the CLI `HOPPER_URL` (without /v3)
 *   and `HOPPER_KEY`, with node_modules/.bin on PATH. The server's self-signed certificate is
 *   trusted the way a real one is (CURL_CA_BUNDLE, NODE_EXTRA_CA_CERTS). So the block where the
 *   README sets HOPPER and KEY by hand is marked not run.
 * - Each file creates everything it uses and keeps ids in shell variables read from earlier
 *   answers (`ID=$(… | jq -r .id)`); e-mail addresses of users differ from file to file.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const PRELUDE = join(import.meta.dirname, 'prelude.sh');
const FILES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];

function healthy(port: number, ca: string): Promise<boolean> {
  return new Promise((resolve) => {
    https
      .get(`https://localhost:${port}/health`, { ca }, (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      })
      .on('error', () => resolve(false));
  });
}

interface Run {
  code: number | null;
  output: string;
}

function runBash(script: string, cwd: string, env: Record<string, string>, timeoutMs: number): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['--noprofile', '--norc', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    const timer = setTimeout(() => {
      output += `\ndoc-test: killed after ${timeoutMs} ms`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

let hopper: HopperProcess;
let serverDir: string;
let port: number;
let key: string;

// One Hopper for the run, started as the README says; each file then runs in its own bash session
// and working directory, README.md first, on the fresh server.
before(async () => {
  serverDir = await mkdtemp(join(tmpdir(), 'hopper-doctest-'));
  const dataDir = join(serverDir, 'data');
  port = await freePort();
  hopper = startHopper({ DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn' });
  const deadline = Date.now() + 90_000;
  let found: string | undefined;
  while (Date.now() < deadline) {
    // The first start prints the Administrator's key, as the README shows.
    found ??= /^ {4}(hop_\w+)$/m.exec(hopper.output())?.[1];
    if (found && existsSync(join(dataDir, 'tls', 'cert.pem'))) {
      if (await healthy(port, await readFile(join(dataDir, 'tls', 'cert.pem'), 'utf8'))) break;
    }
    if (hopper.child.exitCode !== null) assert.fail(`Hopper exited:\n${hopper.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.ok(found, `Hopper did not start and print its key:\n${hopper.output()}`);
  key = found;
});

after(async () => {
  if (hopper) await stopHopper(hopper);
  await rm(serverDir, { recursive: true, force: true });
});

/** Runs the shell blocks of `markdown` in a bash session of their own; the failures, '' if none. */
async function runMarkdown(file: string, markdown: string): Promise<{ failures: string; output: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'hopper-doctest-run-'));
  const cert = join(serverDir, 'data', 'tls', 'cert.pem');
  try {
    await symlink(join(serverDir, 'data'), join(dir, 'data'));
    const script: string[] = [`source ${JSON.stringify(PRELUDE)}`];
    const origin: string[] = ['prelude'];
    for (const block of shellBlocks(markdown)) {
      script.push(`__doc_block ${JSON.stringify(`${file}:${block.line}`)}`);
      origin.push(`${file}:${block.line}`);
      scriptOf(block, (text, line) => {
        script.push(text);
        origin.push(`${file}:${line}`);
      });
    }
    const scriptFile = join(dir, 'doc-test.sh');
    await writeFile(scriptFile, `${script.join('\n')}\n`);
    const { PATH, HOME, LANG, TMPDIR } = process.env;
    const env = {
      PATH: [join(ROOT, 'node_modules', '.bin'), PATH ?? '/usr/bin:/bin'].join(delimiter),
      HOME: HOME ?? dir,
      LANG: LANG ?? 'C.UTF-8',
      TMPDIR: TMPDIR ?? tmpdir(),
      DOCTEST_DIR: dir,
      HOPPER: `https://localhost:${port}/v3`,
      KEY: key,
      HOPPER_URL: `https://localhost:${port}`,
      HOPPER_KEY: key,
      CURL_CA_BUNDLE: cert,
      NODE_EXTRA_CA_CERTS: cert,
    };
    const run = await runBash(scriptFile, dir, env, 50_000);
    const recorded = existsSync(join(dir, 'failures')) ? await readFile(join(dir, 'failures'), 'utf8') : '';
    // "script line N" → the Markdown line it came from.
    const failures = recorded.replace(/script line (\d+)/g, (_, n: string) => origin[Number(n) - 1] ?? `script line ${n}`);
    return { failures: run.code === 0 ? failures : `${failures}exit ${run.code}`, output: run.output };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

for (const file of FILES) {
  const markdown = readFileSync(join(ROOT, file), 'utf8');
  if (shellBlocks(markdown).length === 0) {
    test(`${file} runs as written`, { skip: 'no runnable shell blocks' }, () => {});
    continue;
  }
  test(`${file} runs as written`, { timeout: 60_000 }, async () => {
    const { failures, output } = await runMarkdown(file, markdown);
    assert.equal(failures, '', `${file} failed:\n${failures}\n--- output ---\n${output.slice(-6000)}`);
  });
}

test('the runner stops at an unannounced error, checks announced ones, and skips what is marked', async () => {
  const fence = '```';
  const unannounced = await runMarkdown(
    'x.md',
    `${fence}sh\ncurl -sS -H "Authorization: Bearer $KEY" $HOPPER/contacts/999999\necho not reached\n${fence}\n`,
  );
  assert.match(unannounced.failures, /answered 404, which the text does not announce/);
  assert.match(unannounced.failures, /at x\.md:2/);
  assert.doesNotMatch(unannounced.output, /not reached/);

  const announced = await runMarkdown(
    'y.md',
    [
      `${fence}sh`,
      'curl -sS --fail-with-body -H "Authorization: Bearer $KEY" $HOPPER/contacts/999999   # → 404',
      'N=$(curl -sS -H "Authorization: Bearer $KEY" \\',
      '  "$HOPPER/users" | jq .meta.total)',
      '# → 200 the first page',
      fence,
      '<!-- not run: it would fail -->',
      `${fence}bash`,
      'false',
      fence,
      `${fence}console`,
      '$ false',
      fence,
    ].join('\n'),
  );
  assert.equal(announced.failures, '', announced.output);

  const wrong = await runMarkdown('z.md', `${fence}sh\ncurl -sS -H "Authorization: Bearer $KEY" $HOPPER/users   # → 404\n${fence}\n`);
  assert.match(wrong.failures, /line 2 announces 404, the answer was 200/);
  const offline = await runMarkdown('w.md', `${fence}sh\nfalse\n${fence}\n`);
  assert.match(offline.failures, /a command failed \(exit 1\) at w\.md:2/);
});
