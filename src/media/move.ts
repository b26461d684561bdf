import type { Db } from '../db/database.ts';
import { liveMediaAfter } from './media.ts';
import type { MediaStorage } from './store.ts';

interface MoveCounts {
  copied: number;
  /** Already in the target with the right size: skipped, so a move can be run again after an interruption. */
  already: number;
  /** Live items whose file the source does not have (named through `warn`). */
  missing: number;
  /** Removed from the source after their copy was checked (`deleteSource`). */
  deleted: number;
}

/**
 * Copies the file of every live media item from `source` to `target` (`npm run media:move`), a
 * hundred items per page in id order, and checks each copy's size against the item's before it
 * counts, or before the source's file is removed when `deleteSource` asks for that.
 */
export async function moveMedia(
  db: Db,
  source: MediaStorage,
  target: MediaStorage,
  options: { deleteSource: boolean; warn: (message: string) => void },
): Promise<MoveCounts> {
  const counts: MoveCounts = { copied: 0, already: 0, missing: 0, deleted: 0 };
  for (let after = 0; ; ) {
    const page = await liveMediaAfter(db, after, 100);
    if (page.length === 0) return counts;
    for (const media of page) {
      after = media.id;
      if ((await target.stat(media.storage_key))?.size === media.size) {
        counts.already++;
      } else if ((await source.stat(media.storage_key)) === undefined) {
        counts.missing++;
        options.warn(`media ${media.id}: no file under ${media.storage_key}`);
        continue;
      } else {
        await target.put(media.storage_key, await source.createReadStream(media.storage_key), media.size);
        const copied = await target.stat(media.storage_key);
        if (copied?.size !== media.size) throw new Error(`media ${media.id}: ${copied?.size} bytes arrived, ${media.size} expected`);
        counts.copied++;
      }
      if (options.deleteSource) {
        await source.delete(media.storage_key);
        counts.deleted++;
      }
    }
  }
}
