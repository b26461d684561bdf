import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { bootstrapAdministrator } from '../../src/identity/bootstrap.ts';
import { loadTls } from '../../src/tls.ts';
import { freePort, type HopperProcess, startHopper, stopHopper } from '../sending/support/hopper-process.ts';
import { waitFor } from '../sending/support/wait.ts';
import { testConfigEnv, usingPostgres } from '../support/test-app.ts';
import { FakeSlybroadcast } from '../voicemail/support/fake-slybroadcast.ts';
import { postHttps } from '../voicemail/support/voicemail-app.ts';
import { filesUnder, multipartBody, wavFile } from './fixtures.ts';
import { type LocalS3, startLocalS3 } from './s3-server.ts';

/**
 * Media for many machines (docs/media.md, "Several API processes"): two real `node src/main.ts`
 * processes on one PostgreSQL database, each with a DATA_DIR of its own. Process A (ROLE=api)
 * receives the upload; the file's `full_url` names process B, as it would name any machine behind
 * a load balancer; B (ROLE=all) serves it — whole and by range — and its sending engine hands a
 * drop to a Slybroadcast stand-in, which downloads the audio from that URL as Slybroadcast does.
 * Once with the default store on PostgreSQL (the database), once with an S3-compatible bucket.
 */
const ACCOUNT = { uid: 'hopper@agency.example', password: 'sly-secret' };

/** A GET over HTTPS trusting `ca`, with headers (a Range). */
function getBytes(url: string, ca: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, unknown>; bytes: Buffer }>((resolve, reject) => {
    request(url, { ca, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes: Buffer.concat(chunks) }));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

/** A zone whose wall clock reads about 13:00 now: the drop is inside calling hours whenever the test runs. */
function afternoonZone(now = new Date()): string {
  const offset = Math.min(14, Math.max(-12, 13 - now.getUTCHours()));
  return offset === 0 ? 'Etc/GMT' : `Etc/GMT${offset > 0 ? '-' : '+'}${Math.abs(offset)}`;
}

async function untilHealthy(base: string, ca: string, process: HopperProcess): Promise<void> {
  await waitFor(
    'the process to answer /health',
    async () => {
      if (process.child.exitCode !== null) throw new Error(`it exited:\n${process.output()}`);
      return (await getBytes(`${base}/health`, ca).catch(() => ({ status: 0 }))).status === 200;
    },
    { timeoutMs: 60_000 },
  );
}

async function storeOnOneServeFromAnother(store: 'postgres' | 's3', s3?: LocalS3): Promise<void> {
  const dirs = await Promise.all([mkdtemp(join(tmpdir(), 'hopper-a-')), mkdtemp(join(tmpdir(), 'hopper-b-'))]);
  const [dirA, dirB] = dirs as [string, string];
  // One certificate for both, as behind one name.
  const tls = await loadTls(loadConfig({ DATA_DIR: dirA }));
  const [portA, portB] = [await freePort(), await freePort()];
  const publicUrl = `https://127.0.0.1:${portB}`;
  const sly = new FakeSlybroadcast(ACCOUNT, tls.cert);
  await sly.listen();
  const env = {
    ...testConfigEnv(dirA, s3?.env),
    PUBLIC_URL: publicUrl,
    TLS_CERT_FILE: tls.certFile,
    TLS_KEY_FILE: join(dirA, 'tls', 'key.pem'),
    LOG_LEVEL: 'info',
    SLYBROADCAST_UID: ACCOUNT.uid,
    SLYBROADCAST_PASSWORD: ACCOUNT.password,
    SLYBROADCAST_URL: sly.url,
    SEND_RETRY_BASE: '200ms',
  };
  const config = loadConfig(env);
  assert.equal(config.mediaStore, store);
  const database = await openDatabase(config);
  const processes: HopperProcess[] = [];
  try {
    const admin = await bootstrapAdministrator(database.db, config);
    assert.equal(admin.kind, 'first-start');
    if (admin.kind !== 'first-start') return;
    const a = startHopper({ ...env, ROLE: 'api', DATA_DIR: dirA, PORT: String(portA) });
    const b = startHopper({ ...env, ROLE: 'all', DATA_DIR: dirB, PORT: String(portB) });
    processes.push(a, b);
    const baseA = `https://127.0.0.1:${portA}`;
    await untilHealthy(baseA, tls.cert, a);
    await untilHealthy(publicUrl, tls.cert, b);
    const auth = { authorization: `Bearer ${admin.key}` };

    // A stores the audio.
    const wav = wavFile(6);
    const form = multipartBody([{ name: 'file', filename: 'listing.wav', content: wav, type: 'audio/wav' }]);
    const uploaded = await postHttps(
      `${baseA}/v3/users/${admin.userId}/media`,
      form.body,
      { ...auth, 'content-type': form.contentType },
      tls.cert,
    );
    assert.equal(uploaded.status, 201, uploaded.body);
    const media = JSON.parse(uploaded.body) as { id: number; full_url: string; size: number };
    assert.ok(media.full_url.startsWith(`${publicUrl}/media/`), media.full_url);
    assert.equal(media.size, wav.length);
    assert.deepEqual(await filesUnder(join(dirA, 'media')), [], 'nothing on the disk of the process that received it');

    // B serves it: whole, one range, and HEAD-less headers a provider relies on.
    const whole = await getBytes(media.full_url, tls.cert);
    assert.equal(whole.status, 200);
    assert.ok(whole.bytes.equals(wav), 'B serves the bytes A stored');
    assert.equal(whole.headers['content-type'], 'audio/wav');
    const part = await getBytes(media.full_url, tls.cert, { range: 'bytes=1000-4999' });
    assert.equal(part.status, 206);
    assert.equal(part.headers['content-range'], `bytes 1000-4999/${wav.length}`);
    assert.ok(part.bytes.equals(wav.subarray(1000, 5000)));
    const tail = await getBytes(media.full_url, tls.cert, { range: 'bytes=-100' });
    assert.ok(tail.bytes.equals(wav.subarray(wav.length - 100)));
    // A serves it as well: the same full_url path works on any of the processes.
    const viaA = await getBytes(`${baseA}${new URL(media.full_url).pathname}`, tls.cert);
    assert.ok(viaA.bytes.equals(wav));

    // A drop created on A; B's sending engine hands it to the stand-in, which downloads the audio from B.
    const contact = await postHttps(
      `${baseA}/v3/users/${admin.userId}/contacts`,
      JSON.stringify({ first_name: 'Pat', phone: '7272329118', time_zone: afternoonZone(), tags: ['two-processes'] }),
      { ...auth, 'content-type': 'application/json' },
      tls.cert,
    );
    assert.equal(contact.status, 201, contact.body);
    const tags = JSON.parse((await getBytes(`${baseA}/v3/users/${admin.userId}/tags?name=two-processes`, tls.cert, auth)).bytes.toString());
    const drop = await postHttps(
      `${baseA}/v3/users/${admin.userId}/voicemail_drops`,
      JSON.stringify({
        provider: 'Slybroadcast',
        media_id: media.id,
        callback_number: '(727) 232-9117',
        name: 'Two processes',
        recipients: [{ group: 'Tags', value: tags.data[0].id }],
        status: 'Scheduled',
        send_type: 'Now',
      }),
      { ...auth, 'content-type': 'application/json' },
      tls.cert,
    );
    assert.equal(drop.status, 201, drop.body);
    await waitFor('the stand-in to take the drop', () => sly.drops.length === 1, { timeoutMs: 60_000 });
    const handed = sly.dropTo('7272329118');
    assert.equal(handed.fields.c_url, media.full_url);
    assert.equal(handed.audioBytes, wav.length, 'the provider downloaded the whole file from B');

    if (store === 'postgres') {
      const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM media_blobs`.execute(database.db);
      assert.ok(Number(rows[0]?.n) >= 1, 'the bytes are in the database');
    }
  } finally {
    for (const p of processes) await stopHopper(p);
    await sly.close();
    await sql`DROP SCHEMA IF EXISTS ${sql.id(config.databaseSchema)} CASCADE`.execute(database.db);
    await sql`DROP SCHEMA IF EXISTS ${sql.id(`${config.databaseSchema}_pgboss`)} CASCADE`.execute(database.db);
    await database.close();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  }
}

describe('media for many machines: one API process stores, another serves', () => {
  test('MEDIA_STORE=postgres (the default with DATABASE_URL)', async (t) => {
    if (!usingPostgres) return t.skip('needs PostgreSQL: set DATABASE_URL (CI runs the suite on both databases)');
    await storeOnOneServeFromAnother('postgres');
  });

  test('MEDIA_STORE=s3, an S3-compatible server', async (t) => {
    if (!usingPostgres) return t.skip('needs PostgreSQL: set DATABASE_URL (CI runs the suite on both databases)');
    const s3 = await startLocalS3();
    try {
      await storeOnOneServeFromAnother('s3', s3);
    } finally {
      await s3.close();
    }
  });
});
