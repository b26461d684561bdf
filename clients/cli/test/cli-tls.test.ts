import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadTls } from '../../../src/tls.ts';
import { startTestApp, type TestApp } from '../../../test/support/test-app.ts';

const BIN = join(import.meta.dirname, '..', 'bin', 'hopper.ts');

function hopper(args: string[], env: Record<string, string | undefined>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH, ...env } }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/**
 * A default install over HTTPS with its own self-signed certificate: the CLI says what to do when
 * it does not trust it, and trusts it once the profile names it (`hopper configure --ca`).
 */
describe('hopper and a self-signed certificate', () => {
  let t: TestApp;
  let url: string;
  let scratch: string;
  let env: Record<string, string>;
  let certFile: string;

  before(async () => {
    t = await startTestApp();
    const tls = await loadTls(t.config);
    await t.close();
    t = await startTestApp({ https: { key: tls.key, cert: tls.cert } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    url = `https://localhost:${(t.app.server.address() as AddressInfo).port}`;
    scratch = await mkdtemp(join(tmpdir(), 'hopper-cli-tls-'));
    certFile = join(scratch, 'cert.pem');
    await writeFile(certFile, tls.cert);
    env = { HOME: scratch, XDG_CONFIG_HOME: join(scratch, 'config') };
  });
  after(async () => {
    await t.close();
    await rm(scratch, { recursive: true, force: true });
  });

  test('untrusted: one sentence naming --ca and NODE_EXTRA_CA_CERTS; with --ca in the profile it works', async () => {
    const untrusted = await hopper(['configure', '--url', url, '--key', t.adminKey], env);
    assert.equal(untrusted.code, 1, 'saved, and the check fails');
    assert.match(
      untrusted.stderr,
      new RegExp(
        `^hopper: Cannot reach ${url} \\(from profile default\\): its certificate is not one this machine trusts .*hopper configure --ca /absolute/path/to/data/tls/cert.pem`,
      ),
    );
    const trusted = await hopper(['configure', '--ca', certFile], env);
    assert.equal(trusted.code, 0, trusted.stderr);
    assert.match(trusted.stdout, /The key works/);
    const list = await hopper(['drops', 'list', '--user', String(t.adminId)], env);
    assert.equal(list.code, 0, list.stderr);
    assert.equal(list.stdout, 'No voicemail drops.\n');
    const notPem = join(scratch, 'not.pem');
    await writeFile(notPem, 'hello');
    const bad = await hopper(['configure', '--ca', notPem], env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /is not a PEM certificate/);
  });

  test('a configuration file others can read is warned about', async () => {
    await chmod(join(scratch, 'config', 'hopper', 'config.json'), 0o644);
    const run = await hopper(['drops', 'list', '--user', String(t.adminId)], env);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /holds an API key and can be read by others \(mode 644\); run chmod 600 on it\./);
  });
});
