import type { Config } from './config.ts';
import type { DatabaseHandle } from './db/database.ts';
import type { JobQueue } from './db/job-queue.ts';
import type { Clock } from './time.ts';

/**
 * What the service's parts share in one process: its frozen configuration, the database, the job
 * queue and the clock (tests move it). Routes, pages and domain operations that schedule work
 * take it whole.
 */
export interface AppContext {
  readonly config: Config;
  readonly database: DatabaseHandle;
  readonly queue: JobQueue;
  readonly clock: Clock;
  /** Fetches an SNS signing certificate or subscription URL (tests serve their own); `fetch` when absent. */
  readonly snsFetch?: (url: string) => Promise<string>;
}
