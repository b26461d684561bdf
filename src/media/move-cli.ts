import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { liveMediaAfter } from './media.ts';
import { openStore } from './storage.ts';

// `npm run media:move`: copies the file of every live media item from one store to another — by
// default from the local disk (MEDIA_DIR) to the store MEDIA_STORE names, which is the database
// on PostgreSQL — and checks each copy's size. Files already there with the right size are skipped,
// so the command can be run again after an interruption; `--delete-source` removes each copied
// file from where it came from. docs/media.md, "Moving existing files".
const STORES = ['disk', 'postgres', 's3'] as const;
const { values } = parseArgs({
  options: { from: { type: 'string', default: 'disk' }, to: { type: 'string' }, 'delete-source': { type: 'boolean', default: false } },
});
const config = loadConfig();
const from = STORES.find((s) => s === values.from);
const to = STORES.find((s) => s === (values.to ?? config.mediaStore));
if (!from || !to || from === to) {
  console.error(`usage: npm run media:move -- [--from disk|postgres|s3] [--to disk|postgres|s3] [--delete-source]
  --from defaults to disk, --to to MEDIA_STORE (now ${config.mediaStore}); the two must differ.`);
  process.exit(2);
}
const database = await openDatabase(config);
const counts = { copied: 0, already: 0, missing: 0, deleted: 0 };
try {
  const source = await openStore(from, config, database.db);
  const target = await openStore(to, config, database.db);
  for (let after = 0; ; ) {
    const page = await liveMediaAfter(database.db, after, 100);
    if (page.length === 0) break;
    for (const media of page) {
      after = media.id;
      if ((await target.stat(media.storage_key))?.size === media.size) {
        counts.already++;
      } else if ((await source.stat(media.storage_key)) === undefined) {
        counts.missing++;
        console.warn(`media ${media.id}: no file under ${media.storage_key} in ${from}`);
        continue;
      } else {
        await target.put(media.storage_key, await source.createReadStream(media.storage_key), media.size);
        const copied = await target.stat(media.storage_key);
        if (copied?.size !== media.size)
          throw new Error(`media ${media.id}: ${copied?.size} bytes arrived in ${to}, ${media.size} expected`);
        counts.copied++;
      }
      if (values['delete-source']) {
        await source.delete(media.storage_key);
        counts.deleted++;
      }
    }
  }
} finally {
  await database.close();
}
console.log(
  `Media ${from} → ${to}: ${counts.copied} copied, ${counts.already} already there, ${counts.missing} missing in ${from}` +
    (values['delete-source'] ? `, ${counts.deleted} removed from ${from}` : ''),
);
