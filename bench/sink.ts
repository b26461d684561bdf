import { fork } from 'node:child_process';
import { join } from 'node:path';

/** The benchmarks' SMTP sink (bench/smtp-sink.ts) as a child process, and how to ask it what it received. */
export interface Sink {
  port: number;
  pid: number;
  /** Messages received, distinct Message-IDs among them, and the bytes of their data (after DATA, dot-stuffed). */
  count(): Promise<{ received: number; distinct: number; bytes: number }>;
  reset(): Promise<void>;
  stop(): void;
}

export async function startSink(): Promise<Sink> {
  const child = fork(join(import.meta.dirname, 'smtp-sink.ts'), { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const ask = <T>(type: string) =>
    new Promise<T>((resolve) => {
      const onMessage = (message: { type: string }) => {
        if (message.type !== type) return;
        child.off('message', onMessage);
        resolve(message as T);
      };
      child.on('message', onMessage);
      child.send({ type });
    });
  const port = await new Promise<number>((resolve) => {
    child.once('message', (message: { port: number }) => resolve(message.port));
  });
  return {
    port,
    pid: child.pid!,
    count: () => ask('count'),
    reset: () => ask<unknown>('reset').then(() => undefined),
    stop: () => child.disconnect(),
  };
}
