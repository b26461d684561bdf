/** The fourteen delivery counters of the specification's reporting object, in its order. */
export const COUNTERS = [
  'sent',
  'processed',
  'delivered',
  'open',
  'click',
  'reply',
  'spamreport',
  'unsubscribe',
  'deferred',
  'dropped',
  'bounce',
  'hard_bounce',
  'soft_bounce',
  'failed',
] as const;
export type Counter = (typeof COUNTERS)[number];
export type Reporting = { date: null } & Record<Counter, number>;

/** The reporting of a message nothing has happened to yet (a new one). */
export function emptyReporting(): Reporting {
  const reporting = { date: null } as Reporting;
  for (const name of COUNTERS) reporting[name] = 0;
  return reporting;
}

/** Counter rows per message: concurrent writers mostly hit different rows. */
export const COUNTER_SHARDS = 16;
