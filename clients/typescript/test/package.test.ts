import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../../../test/support/test-app.ts';

/**
 * @hopper/client as a user gets it: `npm pack` (which builds dist/ with tsc), the tarball
 * installed into a fresh project with npm, then used from plain JavaScript on the system's Node
 * (20 on the CI machine, where type stripping does not exist) and on Node 24, and type-checked
 * from a TypeScript file with tsc — against a live Hopper.
 */
const CLIENT = join(import.meta.dirname, '..');
const ROOT = join(CLIENT, '..', '..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], cwd: string, env: Record<string, string | undefined> = process.env): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, env, maxBuffer: 16 * 1024 * 1024, timeout: 180_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** The first `node` on PATH outside any node_modules: the machine's own Node, not the dev dependency. */
async function systemNode(): Promise<string> {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir.includes('node_modules') || !existsSync(join(dir, 'node'))) continue;
    return join(dir, 'node');
  }
  for (const candidate of ['/usr/bin/node', '/usr/local/bin/node']) if (existsSync(candidate)) return candidate;
  throw new Error('no system Node on PATH (npm itself needs one)');
}

/** What a user writes: plain JavaScript, the package's name, nothing of this repository. */
const CONSUMER_JS = `
import { createHash, createHmac } from 'node:crypto';
import { createHopper, unwrap, HopperProblem, verifyWebhook } from '@hopper/client';

const [url, key, userId] = process.argv.slice(2);
const hopper = createHopper({ url, key });
const out = { node: process.version };
const run = createHash('sha1').update(process.version).digest('hex').slice(0, 8);
const created = [];
for (let i = 0; i < 5; i++) {
  const contact = await unwrap(hopper.api.POST('/v3/users/{user_id}/contacts', {
    params: { path: { user_id: Number(userId) } },
    body: { email: \`pkg\${i}.\${run}@example.com\` },
  }));
  created.push(contact.id);
}
out.created = created.length;
const seen = [];
for await (const c of hopper.paginate('/v3/users/{user_id}/contacts', { path: { user_id: Number(userId) }, query: { per_page: 2, id: created } })) seen.push(c.id);
out.paged = seen.length === created.length && seen.every((id) => created.includes(id));
try {
  await unwrap(hopper.api.GET('/v3/contacts/{id}', { params: { path: { id: 999999999 } } }));
} catch (error) {
  out.problem = error instanceof HopperProblem ? { status: error.status, type: error.type } : String(error);
}
const secret = 'whsec_' + Buffer.from('0123456789abcdef0123456789abcdef').toString('base64');
const body = JSON.stringify({ type: 'contact.unsubscribed', timestamp: new Date().toISOString(), data: { id: 1 } });
const id = 'msg_1';
const ts = String(Math.floor(Date.now() / 1000));
const sig = 'v1,' + createHmac('sha256', Buffer.from(secret.slice(6), 'base64')).update(\`\${id}.\${ts}.\${body}\`).digest('base64');
out.verified = verifyWebhook(secret, body, { 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': sig }).type;
try {
  verifyWebhook(secret, body + ' ', { 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': sig });
  out.forged = 'accepted';
} catch {
  out.forged = 'refused';
}
console.log(JSON.stringify(out));
`;

/** A TypeScript user's file: must type-check against the shipped declarations alone. */
const CONSUMER_TS = `
import { createHopper, unwrap, type Contact, type Problem, type VoicemailDrop, HopperProblem } from '@hopper/client';

const hopper = createHopper({ url: 'https://hopper.example.org', key: 'hop_x' });
export async function first(userId: number): Promise<Contact> {
  return unwrap(hopper.api.POST('/v3/users/{user_id}/contacts', { params: { path: { user_id: userId } }, body: { email: 'a@example.com' } }));
}
export function status(drop: VoicemailDrop): string {
  return drop.status;
}
export const problem: Problem | undefined = undefined;
export const isProblem = (e: unknown): boolean => e instanceof HopperProblem;
// @ts-expect-error: a path the API does not have
hopper.api.GET('/v3/nowhere');
`;

describe('@hopper/client as a package', () => {
  let t: TestApp;
  let url: string;
  let project: string;
  let tarball: string;
  before(async () => {
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    project = await mkdtemp(join(tmpdir(), 'hopper-client-project-'));
  });
  after(async () => {
    await t.close();
    await rm(project, { recursive: true, force: true });
  });

  test('npm pack builds JavaScript and declarations, with a README and no tests, TypeScript-only files or CLI', {
    timeout: 180_000,
  }, async () => {
    const packed = await run('npm', ['pack', '--json', '--pack-destination', project], CLIENT);
    assert.equal(packed.code, 0, packed.stderr);
    const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[];
    assert.ok(info);
    tarball = join(project, info.filename);
    const files = info.files.map((f) => f.path).sort();
    for (const needed of ['README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/schema.d.ts']) {
      assert.ok(files.includes(needed), `${needed} is in the tarball: ${files.join(', ')}`);
    }
    assert.deepEqual(
      files.filter((f) => f.startsWith('test/') || f.includes('cli') || f.startsWith('bin/')),
      [],
      'no tests and no CLI in the tarball',
    );
    const manifest = JSON.parse(await readFile(join(CLIENT, 'package.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(manifest.private, undefined, 'the package can be published');
    assert.match(String(manifest.version), /^\d+\.\d+\.\d+$/);
    assert.deepEqual(Object.keys(manifest.dependencies as object).sort(), ['openapi-fetch', 'standardwebhooks']);
  });

  test('installs from the tarball into a fresh project without the CLI dependencies', { timeout: 180_000 }, async () => {
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'my-crm', private: true, type: 'module' }));
    const installed = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], project);
    assert.equal(installed.code, 0, installed.stderr);
    assert.ok(existsSync(join(project, 'node_modules', '@hopper', 'client', 'dist', 'index.js')));
    for (const cliOnly of ['commander', 'cli-progress', 'csv-parse']) {
      assert.ok(!existsSync(join(project, 'node_modules', cliOnly)), `${cliOnly} is not installed for library users`);
    }
  });

  for (const which of ['the system Node', 'Node 24'] as const) {
    test(`runs from plain JavaScript on ${which}: creates, pages, throws problems, verifies webhooks`, { timeout: 60_000 }, async () => {
      assert.ok(existsSync(join(project, 'node_modules', '@hopper', 'client')), 'installed by the test before');
      const node = which === 'Node 24' ? process.execPath : await systemNode();
      await writeFile(join(project, 'consumer.mjs'), CONSUMER_JS);
      const used = await run(node, ['consumer.mjs', url, t.adminKey, String(t.adminId)], project, { PATH: process.env.PATH });
      assert.equal(used.code, 0, used.stderr);
      const out = JSON.parse(used.stdout) as Record<string, unknown>;
      if (which === 'Node 24') assert.match(String(out.node), /^v24\./);
      else console.log(`system Node: ${out.node}`);
      assert.equal(out.created, 5);
      assert.equal(out.paged, true, 'paginate returned the 5 contacts over pages of 2');
      assert.equal((out.problem as { status: number }).status, 404);
      assert.match((out.problem as { type: string }).type, /problems\/not_found$/);
      assert.equal(out.verified, 'contact.unsubscribed');
      assert.equal(out.forged, 'refused');
    });
  }

  test('type-checks a TypeScript user of the package with tsc (nodenext, strict)', { timeout: 120_000 }, async () => {
    await writeFile(join(project, 'consumer.ts'), CONSUMER_TS);
    await writeFile(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          lib: ['es2022', 'dom'],
          types: [],
          strict: true,
          noEmit: true,
        },
        files: ['consumer.ts'],
      }),
    );
    const checked = await run(process.execPath, [TSC, '-p', project], project);
    assert.equal(checked.code, 0, checked.stdout + checked.stderr);
  });
});
