import { test } from 'node:test';

/**
 * The last file of every lane of `npm test` (scripts/test-lane.ts): its one test waits until the
 * lane has sent the outcome of the file before it, so that the runner, which ends the lane's
 * process once its tests are done, cannot end it sooner.
 */
test('the lane has reported every file', async () => {
  await (globalThis as Record<symbol, unknown>)[Symbol.for('hopper.test-lane.flushed')];
});
