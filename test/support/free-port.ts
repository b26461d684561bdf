import { randomInt } from 'node:crypto';
import { createServer } from 'node:net';

/**
 * A TCP port of 127.0.0.1 that is free now, for a server a test or benchmark starts in another
 * process. It is picked at random below Linux's ephemeral range (32768–60999 by default,
 * /proc/sys/net/ipv4/ip_local_port_range), from which the system gives ports to outgoing
 * connections. The port `listen(0)` returns is one of those: between its check and its use, a
 * connection of anything else on a busy machine may take it — a CI run lost a test that way (Hopper
 * refused to start: "another program is using port 34051"). Below the range only another server
 * can take it, and the random pick makes two tests choosing the same one unlikely.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 10_000 + randomInt(22_000);
    if (await bindable(port)) return port;
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
