import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { openJobQueue } from '../src/db/job-queue.ts';

/**
 * Writes the OpenAPI document exactly as /v3/openapi.json serves it, from the app built on a
 * throw-away embedded database without listening: `node scripts/openapi.ts [FILE]` (stdout by default).
 */
const dataDir = await mkdtemp(join(tmpdir(), 'hopper-openapi-'));
try {
  const config = loadConfig({ DATA_DIR: dataDir, PUBLIC_URL: process.env.PUBLIC_URL ?? 'https://localhost:8443', LOG_LEVEL: 'silent' });
  const database = await openDatabase(config);
  const queue = await openJobQueue(database, config);
  const app = await buildApp(config, { database, queue });
  await app.ready();
  const response = await app.inject({ method: 'GET', url: '/v3/openapi.json' });
  if (response.statusCode !== 200) {
    app.swagger(); // throws the reason
    throw new Error(`GET /v3/openapi.json answered ${response.statusCode}`);
  }
  const text = `${JSON.stringify(response.json(), null, 2)}\n`;
  const file = process.argv[2];
  if (file) await writeFile(file, text);
  else process.stdout.write(text);
  await app.close();
  await queue.stop();
  await database.close();
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
