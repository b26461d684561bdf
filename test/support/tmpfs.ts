import { accessSync, constants } from 'node:fs';

/**
 * Test data on tmpfs when the machine has one (loaded by `npm test` with `--import`). A PGlite
 * database or an initdb cluster is about a thousand files, which a disk makes slow to create and
 * copy; /dev/shm makes it a matter of milliseconds. Hopper processes the tests start inherit it.
 */
if (!process.env.TMPDIR) {
  try {
    accessSync('/dev/shm', constants.W_OK);
    process.env.TMPDIR = '/dev/shm';
  } catch {
    // No tmpfs: the system's temporary directory.
  }
}
