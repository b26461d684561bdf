import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { moveMedia } from './move.ts';
import { openStore } from './storage.ts';

// `npm run media:move`: copies the file of every live media item from one store to another — by
// default from the local disk (MEDIA_DIR) to the store MEDIA_STORE names, which is the database
// on PostgreSQL — checking each copy's size. Run again, it skips what is already there;
// `--delete-source` removes each checked copy's original. docs/media.md, "Moving existing files".
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
try {
  const deleteSource = values['delete-source'];
  const counts = await moveMedia(database.db, await openStore(from, config, database.db), await openStore(to, config, database.db), {
    deleteSource,
    warn: (message) => console.warn(`${message} in ${from}`),
  });
  console.log(
    `Media ${from} → ${to}: ${counts.copied} copied, ${counts.already} already there, ${counts.missing} missing in ${from}` +
      (deleteSource ? `, ${counts.deleted} removed from ${from}` : ''),
  );
} finally {
  await database.close();
}
