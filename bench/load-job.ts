/**
 * What bench/api.ts's load generator (autocannon, in a process of its own: `bench/api.ts --load`)
 * is sent and answers; bench/soak.ts runs it too.
 */
export interface LoadJob {
  base: string;
  method: 'GET' | 'POST';
  /** Paths drawn at random; `{letters}` becomes three random letters on every request. */
  paths: string[];
  /** A POST body; `{n}` becomes a number unique to the request. */
  body?: string;
  headers: Record<string, string>;
  duration: number;
  connections: number;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  total: number;
  bad: number;
  /** CPU microseconds per request of the server, of PostgreSQL and of the load generator, over the measured run. */
  cpu?: { server: number; postgres: number; load: number };
}
