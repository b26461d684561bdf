import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { generateApiKey } from '../../src/api-key-format.ts';
import { freePort, type HopperProcess, startHopper, stopHopper } from '../sending/support/hopper-process.ts';
import { waitFor } from '../sending/support/wait.ts';
import { seededDataDir } from '../support/pglite-template.ts';
import { testConfigEnv, usingPostgres } from '../support/test-app.ts';
import { type Receiver, startReceiver } from './support/receiver.ts';

/**
 * Nothing is lost across a worker's death: with the receiver down, `npm start`'s process
 * (`node src/main.ts`) has every event's delivery failing and scheduled for retry; it is killed
 * with SIGKILL; a new process on the same database (PGlite: the same DATA_DIR) delivers every
 * event once the receiver is back, each signed. Runs on both databases.
 */
const CONTACTS = 20;

async function api(port: number, key: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        rejectUnauthorized: false,
        headers: { authorization: `Bearer ${key}`, ...(payload ? { 'content-type': 'application/json' } : {}) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

describe('webhooks across a worker restart', () => {
  let receiver: Receiver;
  let dataDir: string;
  let env: Record<string, string>;
  const processes: HopperProcess[] = [];

  before(async () => {
    receiver = await startReceiver();
    dataDir = usingPostgres ? await mkdtemp(join(tmpdir(), 'hopper-webhook-restart-')) : await seededDataDir('hopper-webhook-restart-');
    const port = await freePort();
    env = {
      ...testConfigEnv(dataDir, {
        PORT: String(port),
        LOG_LEVEL: 'info',
        BOOTSTRAP_ADMIN_KEY: generateApiKey(),
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_CA_FILE: receiver.caFile,
        WEBHOOK_RETRY_BASE: '300ms',
        WEBHOOK_POLL_INTERVAL: '100ms',
        WEBHOOK_TIMEOUT: '2s',
        // The killed process's job blocks the endpoint's next one (policy stately) until the queue
        // sees its heartbeat silent: checked every 5 s, not every minute.
        JOB_SUPERVISE_INTERVAL: '5s',
      }),
    };
  });
  after(async () => {
    await Promise.all(processes.map((p) => stopHopper(p, 'SIGKILL')));
    await receiver?.close();
    if (env?.DATABASE_URL) {
      const client = new pg.Client({ connectionString: env.DATABASE_URL });
      await client.connect();
      for (const schema of [env.DATABASE_SCHEMA, `${env.DATABASE_SCHEMA}_pgboss`])
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    }
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  test(`receiver down, SIGKILL, new worker: all ${CONTACTS} events delivered, signed (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => {
    const port = Number(env.PORT);
    const key = env.BOOTSTRAP_ADMIN_KEY as string;
    await receiver.down();
    const first = startHopper(env);
    processes.push(first);
    await first.ready(90_000).catch((error) => {
      throw new Error(`${error.message}\n${first.output().slice(-2000)}`);
    });
    const me = await waitFor('the API', () =>
      api(port, key, 'GET', '/v3/users?per_page=1').then((r) => r.status === 200 && r.body.data[0]),
    );
    const created = await api(port, key, 'POST', `/v3/users/${me.id}/webhooks`, { url: receiver.url, events: ['contact.created'] });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const endpoint = created.body;
    const ids: number[] = [];
    for (let i = 0; i < CONTACTS; i++) {
      const contact = await api(port, key, 'POST', `/v3/users/${me.id}/contacts`, { email: `restart${i}@example.com` });
      assert.equal(contact.status, 201);
      ids.push(contact.body.id);
    }
    // Every delivery has failed at least once and waits for its retry.
    await waitFor('every delivery to have failed once', async () => {
      const listed = await api(port, key, 'GET', `/v3/webhooks/${endpoint.id}/deliveries?per_page=100`);
      return (
        listed.body.data.length === CONTACTS &&
        listed.body.data.every((d: { attempts: number; last_error: string | null }) => d.attempts >= 1 && d.last_error)
      );
    });
    await stopHopper(first, 'SIGKILL');
    await receiver.up();
    const second = startHopper(env);
    processes.push(second);
    await second.ready(90_000);
    await waitFor('the API again', () => api(port, key, 'GET', '/v3/users?per_page=1').then((r) => r.status === 200), {
      timeoutMs: 60_000,
    });
    await waitFor(
      'every event delivered',
      async () => {
        const listed = await api(port, key, 'GET', `/v3/webhooks/${endpoint.id}/deliveries?per_page=100&state=delivered`);
        return listed.status === 200 && listed.body.meta.total === CONTACTS;
      },
      { timeoutMs: 120_000 },
    ).catch((error) => {
      throw new Error(`${error.message}\n${second.output().slice(-3000)}`);
    });
    const verifier = new Webhook(endpoint.secret);
    const seen = new Set<number>();
    for (const r of receiver.received) {
      verifier.verify(r.body, r.headers);
      seen.add(JSON.parse(r.body).data.id);
    }
    assert.deepEqual(
      [...seen].sort((a, b) => a - b),
      ids,
    );
    assert.equal(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size, CONTACTS);
    await stopHopper(second);
  });
});
