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

/** Counter rows per message: concurrent writers mostly hit different rows. */
export const COUNTER_SHARDS = 16;
