import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertProblem, createUser, TIMESTAMP } from '../support/factories.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';
import { asKey, fetchBytes, filesUnder, mp3File, PNG, postForm, storedFiles, upload, wavFile } from './fixtures.ts';

const MEDIA_FIELDS = [
  'collection_name',
  'created_at',
  'deleted_at',
  'download_url',
  'file_name',
  'full_url',
  'id',
  'mime_type',
  'name',
  'readable_size',
  'size',
  'updated_at',
];

describe('media upload', () => {
  let t: TestApp;
  let user: Awaited<ReturnType<typeof createUser>>;
  before(async () => {
    t = await startTestApp();
    user = await createUser(t, 'User');
  });
  after(() => t.close());

  test('a WAV upload is stored with the exact field set, detected type and a public URL', async () => {
    const wav = wavFile(6);
    const reply = await postForm(t.app, user.key, `/v3/users/${user.id}/media`, [
      { name: 'name', value: 'Open house' },
      { name: 'file', filename: 'Open House (final).WAV', content: wav, type: 'text/plain' },
    ]);
    assert.equal(reply.status, 201, reply.raw);
    const media = reply.body;
    assert.deepEqual(Object.keys(media).sort(), MEDIA_FIELDS);
    assert.equal(typeof media.id, 'number');
    assert.equal(media.name, 'Open house');
    assert.equal(media.file_name, 'Open-House-final.wav');
    assert.equal(media.collection_name, 'audio');
    assert.equal(media.mime_type, 'audio/wav', 'the type comes from the bytes, not the part header');
    assert.equal(media.size, wav.length);
    assert.equal(media.readable_size, '93.79 KB');
    assert.match(media.full_url, /^https:\/\/hopper\.test\/media\/[A-Za-z0-9_-]{32}\/Open-House-final\.wav$/);
    assert.equal(media.download_url, `https://hopper.test/v3/media/${media.id}/download`);
    assert.match(media.created_at, TIMESTAMP);
    assert.match(media.updated_at, TIMESTAMP);
    assert.equal(media.deleted_at, null);
    assert.equal(reply.headers.location, `https://hopper.test/v3/media/${media.id}`);

    const read = await asKey(t.app, user.key).get(`/v3/media/${media.id}`);
    assert.equal(read.status, 200);
    assert.deepEqual(read.body, media);

    const file = await fetchBytes(t.app, media.full_url);
    assert.equal(file.status, 200);
    assert.equal(file.headers['content-type'], 'audio/wav');
    assert.equal(file.headers['accept-ranges'], 'bytes');
    assert.equal(file.headers['x-content-type-options'], 'nosniff');
    assert.ok(file.bytes.equals(wav), 'the public URL serves the very bytes uploaded');
  });

  test('an MP3 upload is audio/mpeg, named after the file, and its duration is recorded', async () => {
    const mp3 = mp3File(7);
    const media = await upload(t.app, user.key, user.id, 'greeting.mp3', mp3);
    assert.equal(media.mime_type, 'audio/mpeg');
    assert.equal(media.name, 'greeting');
    assert.equal(media.file_name, 'greeting.mp3');
    const file = await fetchBytes(t.app, media.full_url);
    assert.equal(file.headers['content-type'], 'audio/mpeg');
    assert.ok(file.bytes.equals(mp3));
    const row = await t.database.db.selectFrom('media').select('duration_seconds').where('id', '=', media.id).executeTakeFirstOrThrow();
    assert.ok(Math.abs((row.duration_seconds ?? 0) - 7) < 0.1, `duration ${row.duration_seconds}`);
  });

  test('the WAV duration comes from its header', async () => {
    const media = await upload(t.app, user.key, user.id, 'short.wav', wavFile(2.5));
    const row = await t.database.db.selectFrom('media').select('duration_seconds').where('id', '=', media.id).executeTakeFirstOrThrow();
    assert.equal(row.duration_seconds, 2.5);
  });

  test('the extension follows the bytes: an MP3 called .wav is stored as .mp3', async () => {
    const media = await upload(t.app, user.key, user.id, 'message.wav', mp3File(1));
    assert.equal(media.file_name, 'message.mp3');
    assert.equal(media.mime_type, 'audio/mpeg');
  });

  test('the audio collection refuses text and images with a 400 naming file, and keeps nothing', async () => {
    const storedBefore = await storedFiles(t);
    const text = await postForm(t.app, user.key, `/v3/users/${user.id}/media`, [
      { name: 'file', filename: 'notes.mp3', content: Buffer.from('just some text pretending to be audio\n'), type: 'audio/mpeg' },
    ]);
    assertProblem(text, 400, 'validation');
    assert.deepEqual(Object.keys(text.body.errors), ['file']);
    assert.match(text.body.errors.file[0], /audio/);

    const image = await postForm(t.app, user.key, `/v3/users/${user.id}/media`, [
      { name: 'collection_name', value: 'audio' },
      { name: 'file', filename: 'pixel.png', content: PNG },
    ]);
    assertProblem(image, 400, 'validation');
    assert.match(image.body.errors.file[0], /not image\/png/);
    assert.deepEqual(await storedFiles(t), storedBefore, 'a refused file is not stored');
    assert.deepEqual(await filesUnder(join(t.dataDir, 'media-incoming')), [], 'nor left in staging');
  });

  test('another collection takes images, and still refuses unknown types', async () => {
    const media = await upload(t.app, user.key, user.id, 'logo.png', PNG, [{ name: 'collection_name', value: 'images' }]);
    assert.equal(media.collection_name, 'images');
    assert.equal(media.mime_type, 'image/png');
    const file = await fetchBytes(t.app, media.full_url);
    assert.equal(file.headers['content-type'], 'image/png');

    const unknown = await postForm(t.app, user.key, `/v3/users/${user.id}/media`, [
      { name: 'collection_name', value: 'images' },
      { name: 'file', filename: 'x.bin', content: Buffer.from('plain words') },
    ]);
    assertProblem(unknown, 400, 'validation');
    assert.ok(unknown.body.errors.file);
  });

  test('readable_size uses 1024-based units with two decimals', async () => {
    const { readableSize } = await import('../../src/media/media.ts');
    assert.equal(readableSize(0), '0 B');
    assert.equal(readableSize(1023), '1023 B');
    assert.equal(readableSize(1024), '1.00 KB');
    assert.equal(readableSize(664755), '649.17 KB');
    assert.equal(readableSize(1048575), '1.00 MB');
    assert.equal(readableSize(20 * 1024 * 1024), '20.00 MB');
    assert.equal(readableSize(3 * 1024 ** 3 + 1024 ** 2 * 512), '3.50 GB');
  });
});
