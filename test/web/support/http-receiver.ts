import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A plain-HTTP webhook receiver on loopback, for the webhook pages (Hopper allows it with
 * WEBHOOK_ALLOW_HTTP and WEBHOOK_ALLOW_PRIVATE). It keeps every post as it arrived and answers
 * what `respond` says (200 and no body unless told otherwise).
 */
export interface HttpReceiver {
  url: string;
  received: { headers: IncomingHttpHeaders; body: string }[];
  respond: (index: number) => { status: number; body?: string };
  close(): Promise<void>;
}

export async function startHttpReceiver(): Promise<HttpReceiver> {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      receiver.received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      const { status, body = '' } = receiver.respond(receiver.received.length - 1);
      response.writeHead(status, { 'content-type': 'text/html; charset=utf-8' }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const receiver: HttpReceiver = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hopper`,
    received: [],
    respond: () => ({ status: 200 }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  return receiver;
}
