import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, test } from 'node:test';
import { freePort, type HopperProcess, startHopper, stopHopper } from '../sending/support/hopper-process.ts';
import { tools } from '../support/tools.ts';
import { scriptOf, shellBlocks } from './shell-blocks.ts';

/**
 * The README and docs/*.md run as pasted. A fresh Hopper is started as the README says
 * (`node src/main.ts`, embedded PGlite in a temporary DATA_DIR, a free PORT). Each file then runs
 * in a bash session of its own, `set -eo pipefail`, in a fresh directory laid out like the
 * reader's clone (`data/` is the server's DATA_DIR, `node_modules/` the repository's), with an
 * environment that holds nothing a reader's fresh shell would not: PATH without any
 * node_modules/.bin, HOME, LANG, TMPDIR. README.md runs first, on the empty server; the other
 * files after it, so they must not assume ids or the absence of other rows.
 *
 * Conventions for writers:
 * - ```sh and ```bash blocks run; any other fence (```console, ```text, ```json, ```js, bare) is
 *   shown only. A block right after a `<!-- not run -->` line (a reason may follow:
 *   `<!-- not run: needs a Slybroadcast account -->`) is not run either.
 * - The set-up a reader does by hand is a block right after a `<!-- set-up -->` line. It runs
 *   with the two values a reader copies from the first start's output put in for this server's:
 *   the printed base URL (`https://localhost:8443` in the docs) and the printed key (`hop_2Xq…`
 *   or `hop_…`). Nothing else is provided: every variable, certificate and PATH entry a block
 *   uses comes from a set-up block. Every file runs after the README's set-up blocks (the docs
 *   say so at their top), then its own.
 * - The README's set-up ends in `scratch/`, which git ignores: files the examples write (keys,
 *   CSVs, audio) go there, and the test fails if any other file appears in the clone.
 * - Every HTTP answer must be 2xx, except where the text announces the status in a comment
 *   `# → NNN` at the end of the command or on the line right after it (`# → 404 later reads fail`).
 *   An announced status is checked exactly, 2xx included (`# → 201` must be a 201). `curl` is
 *   wrapped in the session to see each status (test/docs/prelude.sh), so this holds for `curl`
 *   written out as well as for helpers such as the README's `hcurl`.
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

/**
 * How long one document's commands may run before they are taken for hung: docs/cli.md, about 20 s
 * on a quiet machine, ran past 50 s in a CI run on a machine that copied memory at 270 MB/s
 * (2026-11-29); each of its commands starts a Node process.
 */
const SCRIPT_MS = 150_000;

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
/** The server's address as its first start printed it (`Base URL: https://localhost:PORT/v3`). */
let origin: string;

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
  const printed = /^Base URL: (https:\/\/\S+)\/v3$/m.exec(hopper.output())?.[1];
  assert.ok(printed, `the first start prints the base URL:\n${hopper.output()}`);
  origin = printed;
});

after(async () => {
  if (hopper) await stopHopper(hopper);
  await rm(serverDir, { recursive: true, force: true });
});

/** The values of the docs' set-up blocks that a reader replaces with those of their own first start. */
const DOC_ORIGIN = 'https://localhost:8443';
const DOC_KEYS = /hop_2Xq…|hop_…/g;

/** A set-up block as this server's reader types it: the printed address and key in place of the docs' examples. */
function adapted(text: string): string {
  return text.replaceAll(DOC_ORIGIN, origin).replace(DOC_KEYS, key);
}

const README_SETUP = shellBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8')).filter((block) => block.setup);

/** A reader's PATH: the system's, without the node_modules/.bin that `npm test` put in front. */
function readersPath(): string {
  return (process.env.PATH ?? '/usr/bin:/bin')
    .split(delimiter)
    .filter((dir) => !dir.includes('node_modules'))
    .join(delimiter);
}

/** Runs the shell blocks of `markdown` in a bash session of their own; the failures, '' if none. */
async function runMarkdown(file: string, markdown: string): Promise<{ failures: string; output: string; left: string[] }> {
  // `clone` is the reader's checkout (where they ran npm start); `work` holds the doc-test's own files.
  const clone = await mkdtemp(join(tmpdir(), 'hopper-doctest-clone-'));
  const work = await mkdtemp(join(tmpdir(), 'hopper-doctest-run-'));
  try {
    await symlink(join(serverDir, 'data'), join(clone, 'data'));
    await symlink(join(ROOT, 'node_modules'), join(clone, 'node_modules'));
    await mkdir(join(work, 'home'));
    const script: string[] = [`source ${JSON.stringify(PRELUDE)}`];
    const sources: string[] = ['prelude'];
    const blocks = [
      ...(file === 'README.md' ? [] : README_SETUP.map((block) => ({ block, from: 'README.md' }))),
      ...shellBlocks(markdown).map((block) => ({ block, from: file })),
    ];
    for (const { block, from } of blocks) {
      script.push(`__doc_block ${JSON.stringify(`${from}:${block.line}`)}`);
      sources.push(`${from}:${block.line}`);
      scriptOf(block, (text, line) => {
        script.push(block.setup ? adapted(text) : text);
        sources.push(`${from}:${line}`);
      });
    }
    const scriptFile = join(work, 'doc-test.sh');
    await writeFile(scriptFile, `${script.join('\n')}\n`);
    const env = {
      PATH: readersPath(),
      HOME: join(work, 'home'),
      LANG: process.env.LANG ?? 'C.UTF-8',
      TMPDIR: process.env.TMPDIR ?? tmpdir(),
      DOCTEST_DIR: work,
    };
    const run = await runBash(scriptFile, clone, env, SCRIPT_MS);
    const recorded = existsSync(join(work, 'failures')) ? await readFile(join(work, 'failures'), 'utf8') : '';
    // "script line N" → the Markdown line it came from.
    const failures = recorded.replace(/script line (\d+)/g, (_, n: string) => sources[Number(n) - 1] ?? `script line ${n}`);
    const left = readdirSync(clone).filter((name) => !['data', 'node_modules', 'scratch'].includes(name));
    return { failures: run.code === 0 ? failures : `${failures}exit ${run.code}`, output: run.output, left };
  } finally {
    await rm(clone, { recursive: true, force: true });
    await rm(work, { recursive: true, force: true });
  }
}

test("the README's set-up sets what the docs use, with absolute certificate paths, and ends in an ignored scratch/", () => {
  assert.ok(README_SETUP.length > 0, 'README.md has a block marked <!-- set-up -->');
  const text = README_SETUP.flatMap((block) => block.lines).join('\n');
  assert.ok(text.includes(DOC_ORIGIN), `the set-up names the address the first start prints (${DOC_ORIGIN})`);
  assert.match(text, DOC_KEYS, 'the set-up names the key the first start prints');
  for (const name of ['HOPPER', 'KEY', 'CURL_CA_BUNDLE', 'NODE_EXTRA_CA_CERTS']) assert.match(text, new RegExp(`export ${name}=`), name);
  for (const line of text.split('\n').filter((l) => /cert\.pem/.test(l)))
    assert.match(line, /"\$PWD\/data\/tls\/cert\.pem"|\$CURL_CA_BUNDLE/, line);
  assert.match(text, /cd scratch/);
  assert.match(readFileSync(join(ROOT, '.gitignore'), 'utf8'), /^\/scratch\/$/m);
  for (const file of FILES) {
    const markdown = readFileSync(join(ROOT, file), 'utf8');
    // No block run or shown relies on the directory it is run from to find the certificate.
    assert.doesNotMatch(
      markdown,
      /(?:--cacert|NODE_EXTRA_CA_CERTS=|CURL_CA_BUNDLE=)\s*["']?data\//,
      `${file}: a relative certificate path`,
    );
    if (file !== 'README.md' && shellBlocks(markdown).length > 0) {
      assert.match(markdown, /README\.md#set-up/, `${file} has runnable examples, so it points to the README's set-up`);
    }
  }
});

for (const file of FILES) {
  const markdown = readFileSync(join(ROOT, file), 'utf8');
  if (shellBlocks(markdown).length === 0) {
    test(`${file} runs as written`, { skip: 'no runnable shell blocks' }, () => {});
    continue;
  }
  // The docs read ids from answers with jq, as they tell the reader to.
  test(`${file} runs as written`, { timeout: SCRIPT_MS + 10_000, skip: tools.jq.skip }, async () => {
    const { failures, output, left } = await runMarkdown(file, markdown);
    assert.equal(failures, '', `${file} failed:\n${failures}\n--- output ---\n${output.slice(-6000)}`);
    assert.deepEqual(left, [], `${file} left files outside scratch/`);
  });
}

test('the runner stops at an unannounced error, checks announced ones, and skips what is marked', { skip: tools.jq.skip }, async () => {
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
