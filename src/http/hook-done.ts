/**
 * Hooks in Fastify's `done` style (`(request, reply, done)`): synchronous on the path most
 * requests take — a refusal thrown, which Fastify answers as an async hook's rejection — and only
 * the rest waits for a promise. An async hook costs every request a promise and a turn of the
 * microtask queue even when it has nothing to wait for (docs/performance.md, "Hooks").
 */
export type Done = (error?: Error) => void;

/** Calls `done` when `work` settles: with its error, or with nothing. */
export function doneWhen(work: Promise<unknown>, done: Done): void {
  work.then(() => done(), done);
}
